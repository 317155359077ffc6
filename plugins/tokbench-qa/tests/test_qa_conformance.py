"""The checks every tokbench task must pass, for both tasks and against every registered model."""
from tokbench.testing import TaskConformance


class TestQATasksConformance(TaskConformance):
    tasks = ["qa-fruit-count", "qa-fruit-preference"]
