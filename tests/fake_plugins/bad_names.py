"""A plugin whose task and model names cannot head a record file name: one with '/', one of 300 characters."""
from tokbench import ModelSpec, TaskSpec, hookimpl
from tokbench_baselines import LAST_TOKEN
from tokbench_walks import RANDOM_WALK

TOKBENCH_CONTRACT = 2


@hookimpl
def register_tasks(register):
    register(TaskSpec(name="walk/evil", version="1", description="a slash", implementation=RANDOM_WALK.implementation,
                      params=RANDOM_WALK.params))


@hookimpl
def register_models(register):
    register(ModelSpec(name="m" * 300, version="1", description="too long", implementation=LAST_TOKEN.implementation))
