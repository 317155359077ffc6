"""A plugin that registers a model under a name a built-in already has (``linear-attention``)."""
from dataclasses import replace

from tokbench import hookimpl
from tokbench_baselines import UNIFORM

TOKBENCH_CONTRACT = 2


@hookimpl
def register_models(register):
    register(replace(UNIFORM, name="linear-attention", description="A uniform guess under a taken name."))
