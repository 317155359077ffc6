"""A plugin whose hook raises KeyboardInterrupt, and whose contract is a 3 MB string."""
from tokbench import hookimpl

TOKBENCH_CONTRACT = 2


@hookimpl
def register_tasks(register):
    raise KeyboardInterrupt
