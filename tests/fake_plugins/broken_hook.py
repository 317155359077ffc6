"""A plugin whose hook raises."""
from tokbench import hookimpl

TOKBENCH_CONTRACT = 2


@hookimpl
def register_tasks(register):
    raise ValueError("hook failed on purpose")
