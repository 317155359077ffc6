"""The whole plugin surface of tokbench: every hook a plugin may implement.

A plugin is a module named by an entry point in the ``tokbench`` group. It
implements any of the hooks below, decorated with :data:`hookimpl`::

    from tokbench import TaskSpec, hookimpl

    @hookimpl
    def register_tasks(register):
        register(TaskSpec(name="my-task", version="1", description="...",
                          implementation="my_plugin.task:MyTask"))

Implementing a hook that is not declared here is an error, reported with the
plugin's name, so a misspelled hook never goes unnoticed.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from tokbench.specs import ModelSpec, TaskSpec

PROJECT = "tokbench"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def register_tasks(register: Callable[[TaskSpec], None]) -> None:
    """Register tasks by calling ``register(TaskSpec(...))`` once per task.

    Keep this cheap: build only the spec. The task's implementation module is
    imported when a run creates the task, so torch must not be imported here.
    Task names must be unique across all installed plugins.
    """


@hookspec
def register_models(register: Callable[[ModelSpec], None]) -> None:
    """Register models by calling ``register(ModelSpec(...))`` once per model.

    The same rules as :func:`register_tasks` apply: specs only, no torch, and
    unique names across all installed plugins.
    """
