"""A plugin registering a model name that no built-in has; installed under two entry points, the name is shared."""
from dataclasses import replace

from tokbench import hookimpl
from tokbench_baselines import UNIFORM

TOKBENCH_CONTRACT = 2


@hookimpl
def register_models(register):
    register(replace(UNIFORM, name="shared-guess", description="A uniform guess under a name two plugins share."))
