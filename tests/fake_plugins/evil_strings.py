"""A task plugin whose strings need escaping: <script>, | and & in its description, citation and a parameter."""
from tokbench import Param, TaskSpec, hookimpl
from tokbench_walks import RANDOM_WALK

TOKBENCH_CONTRACT = 2

EVIL = "<script>alert(1)</script> a|b & c"


@hookimpl
def register_tasks(register):
    register(TaskSpec(name="evil-walk", version="1", description=EVIL, citation=EVIL,
                      implementation="tokbench_walks.walks:RandomWalk",
                      params=(*RANDOM_WALK.params, Param("tag", "str", "x|y&<z>", "a value that needs escaping"))))
