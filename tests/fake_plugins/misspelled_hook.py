"""A plugin that implements a hook that does not exist (a typo of register_tasks)."""
from tokbench import hookimpl

TOKBENCH_CONTRACT = 2


@hookimpl
def register_task(register):
    pass
