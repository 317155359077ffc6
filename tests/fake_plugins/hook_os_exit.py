"""A plugin whose hook calls os._exit(0), which ends a process at once with status 0 and no output."""
import os

from tokbench import hookimpl


@hookimpl
def register_tasks(register):
    os._exit(0)
