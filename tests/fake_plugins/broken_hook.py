"""A plugin whose hook raises."""
from tokbench import hookimpl


@hookimpl
def register_tasks(register):
    raise ValueError("hook failed on purpose")
