"""A plugin that declares a contract newer than this tokbench serves: refused at load, in one line."""
from tokbench import TaskSpec, hookimpl

TOKBENCH_CONTRACT = 3


@hookimpl
def register_tasks(register):
    register(TaskSpec(name="from-the-future", version="1", description="needs contract 3",
                      implementation="nowhere:Task"))
