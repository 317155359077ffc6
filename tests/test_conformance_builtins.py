"""The built-in plugins pass the same conformance kit that third-party plugins use."""
from tokbench.plugins import registry
from tokbench.testing import ModelConformance, TaskConformance


def _builtin(specs: dict) -> list[str]:
    """Names registered by the tokbench distribution itself, so installed third-party plugins do not count."""
    return sorted(name for name, spec in specs.items() if spec.plugin == "tokbench")


BUILTIN_TASKS = _builtin(registry().tasks)
BUILTIN_MODELS = _builtin(registry().models)


def test_builtins_are_registered():
    assert BUILTIN_TASKS and BUILTIN_MODELS


class TestBuiltinTasks(TaskConformance):
    tasks = BUILTIN_TASKS
    models = BUILTIN_MODELS


class TestBuiltinModels(ModelConformance):
    tasks = BUILTIN_TASKS
    models = BUILTIN_MODELS
