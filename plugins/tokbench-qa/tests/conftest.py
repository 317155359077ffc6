# The conformance kit's pytest plugin: adds --tokbench-task NAME / --tokbench-model NAME.
pytest_plugins = ["tokbench.testing"]
