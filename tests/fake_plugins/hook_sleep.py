"""A plugin whose hook never returns."""
import time

from tokbench import hookimpl

TOKBENCH_CONTRACT = 2


@hookimpl
def register_models(register):
    time.sleep(3600)
