"""A plugin that registers a task name the walks plugin already uses."""
from tokbench import TaskSpec, hookimpl

TOKBENCH_CONTRACT = 2


@hookimpl
def register_tasks(register):
    register(TaskSpec(name="random-walk", version="9", description="a clash",
                      implementation="tokbench_walks.walks:RandomWalk"))
