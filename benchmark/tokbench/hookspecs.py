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

The contract between tokbench and its plugins has a number, :data:`CONTRACT`. A hook
module declares the contract it was written for with a module attribute::

    TOKBENCH_CONTRACT = 2

A module without it was written before the contract had a number: it is taken as
contract 1 and runs through the adapter of :mod:`tokbench.compat` (its own code still
sees contract 1); ``tokbench run`` says once per run, before training, each change its
author should make. A module declaring a contract this tokbench does
not know is refused at load with one line (see CONTRIBUTING.md, "Migrating to
contract 2").
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from tokbench.specs import ModelSpec, TaskSpec

PROJECT = "tokbench"
#: The plugin contract this tokbench implements. Version 2: labels at many positions,
#: ``AttentionTarget``, attention ``(n, L, H, Q, T + S)``, ``forward(tokens, need_attention)``.
CONTRACT = 2
#: The oldest contract still served, through the adapter in :mod:`tokbench.compat`.
OLDEST_CONTRACT = 1
#: The module attribute in which a plugin declares its contract.
CONTRACT_ATTRIBUTE = "TOKBENCH_CONTRACT"
#: Where a plugin's author reads what changed and how to migrate.
MIGRATION = "CONTRIBUTING.md#migrating-to-contract-2"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def register_tasks(register: Callable[[TaskSpec], None]) -> None:
    """Register tasks by calling ``register(TaskSpec(...))`` once per task.

    Keep this cheap: build only the spec. The task's implementation module is
    imported when a run creates the task, so torch must not be imported here.
    Every task is also reachable as ``PLUGIN:NAME`` (PLUGIN being the entry-point
    name); a bare name registered by two plugins is ambiguous where it is used.

    :param register: call it once per task with a :class:`tokbench.TaskSpec`; a
        plugin may register any number of tasks.

    .. versionchanged:: 0.2.0
       Contract 2. The hook module declares ``TOKBENCH_CONTRACT = 2``; names are
       qualified by the plugin, and a clash no longer stops every command.
    """


@hookspec
def register_models(register: Callable[[ModelSpec], None]) -> None:
    """Register models by calling ``register(ModelSpec(...))`` once per model.

    The same rules as :func:`register_tasks` apply: specs only, no torch, and
    a bare name shared with another plugin is ambiguous (``PLUGIN:NAME`` is not).

    :param register: call it once per model with a :class:`tokbench.ModelSpec`; a
        plugin may register any number of models.

    .. versionchanged:: 0.2.0
       Contract 2 (see :func:`register_tasks`); ``ModelSpec.oracle`` marks a
       reference predictor that the leaderboard keeps out of the rankings.
    """
