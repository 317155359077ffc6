"""The plugin host: load entry points one by one, call their hooks, build the registry.

Every task and model, built-in or third-party, arrives through an entry point
in the ``tokbench`` group; there is no private path for the built-ins.

Faults are isolated per plugin: a plugin that fails to import, raises in a hook
or calls ``sys.exit`` or ``os._exit`` there, or does not finish importing or registering within
the time limit, is recorded with its error and everything else keeps working
(a plugin that hangs is left behind in a daemon thread). Contract
violations that would make results ambiguous (a hook that does not exist) stop
the command with a clear message that names the plugin and the environment
variable that disables it.

Every task and model has a qualified name ``PLUGIN:NAME`` (PLUGIN is the
entry-point name, checked at load like task and model names, since it heads
record file names). A built-in (registered by tokbench's own distribution) keeps
its bare name, and so its identity and config hash, whatever is installed: a
plugin that registers the same name is listed, and runs, under its qualified
name. A bare name that several plugins (and no built-in) register is ambiguous:
each of them runs under its qualified name, and using the bare name is an error
naming them, never a failure of every command.

A hook module declares the contract it was written for (``TOKBENCH_CONTRACT``,
see :mod:`tokbench.hookspecs`); one without a declaration is contract 1, served
through :mod:`tokbench.compat`; one of a contract this host does not serve is
refused at load with one line.

Environment variables:
    TOKBENCH_PLUGINS           comma-separated allow-list of plugin (entry-point) names, as
                               ``tokbench plugins`` shows them; when set, only these load.
    TOKBENCH_DISABLE_PLUGINS   comma-separated block-list of plugin names. A name that no
                               installed plugin has is reported as a warning.
    TOKBENCH_PLUGIN_TIMEOUT    seconds each plugin may take to import, and each of its
                               hooks to register (default 30).
"""
from __future__ import annotations

import os
import reprlib
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache, partial
from importlib.metadata import EntryPoint, entry_points
from typing import Any

import pluggy

from tokbench import hookspecs
from tokbench.errors import PluginConflictError, UsageError, did_you_mean, unknown_name
from tokbench.results import check_name
from tokbench.specs import ModelSpec, TaskSpec

ENTRY_POINT_GROUP = "tokbench"
ALLOW_ENV = "TOKBENCH_PLUGINS"
BLOCK_ENV = "TOKBENCH_DISABLE_PLUGINS"
TIMEOUT_ENV = "TOKBENCH_PLUGIN_TIMEOUT"
DEFAULT_TIMEOUT_SECONDS = 30.0
_HOOKS = {"register_tasks": TaskSpec, "register_models": ModelSpec}


@dataclass
class PluginInfo:
    """What ``tokbench plugins`` reports about one entry point."""

    name: str
    distribution: str
    version: str
    module: str
    status: str = "ok"  # ok | error | disabled
    contract: int | None = None  # the contract its hook module declares (1 where it declares none)
    hooks: list[str] = field(default_factory=list)
    tasks: list[str] = field(default_factory=list)
    models: list[str] = field(default_factory=list)
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


BUILTIN_DISTRIBUTION = "tokbench"  # the distribution whose entry points are the built-in plugins


def origin(spec: TaskSpec | ModelSpec) -> str:
    """Where a registered spec comes from: ``"builtin"`` (tokbench's own distribution) or ``"plugin"``."""
    return "builtin" if spec.plugin == BUILTIN_DISTRIBUTION else "plugin"


class AmbiguousNameError(UsageError):
    """A bare task or model name that several plugins, and no built-in, register."""


def _bare_keeper(group: list[Any]) -> Any:
    """The spec of ``group`` (those registering one bare name) that keeps the bare name: the only one, or the
    built-in among them; None when several plugins and no built-in share it."""
    if len(group) == 1:
        return group[0]
    return next((spec for spec in group if origin(spec) == "builtin"), None)


class SpecIndex(dict):
    """Specs by the name to use: the bare name, or ``PLUGIN:NAME`` where another plugin has the bare name.

    A built-in keeps its bare name whatever else registers it; the others sharing it run, and
    record, under their qualified names. Iteration gives the names to use; a lookup (``in``,
    ``[]``) also accepts every qualified name, and raises :class:`AmbiguousNameError` for a bare
    name that several plugins and no built-in register, naming the qualified names to use instead.
    """

    def __init__(self, kind: str, specs: Iterable[TaskSpec | ModelSpec]) -> None:
        super().__init__()
        by_bare: dict[str, list[Any]] = {}
        for spec in specs:
            by_bare.setdefault(spec.name, []).append(spec)
        self.kind, self.qualified = kind, {}
        self.ambiguous: dict[str, list[str]] = {}
        self.renamed: list[str] = []  # a line per spec that yields a bare name to a built-in
        for bare, group in by_bare.items():
            keeper = _bare_keeper(group)
            if len(group) > 1 and keeper is None:
                self.ambiguous[bare] = sorted(s.qualified_name for s in group)
            for spec in group:
                if spec is not keeper:  # it runs, and records, under its qualified name
                    if keeper is not None:
                        self.renamed.append(f"plugin {spec.entry_point!r} ({spec.plugin}) registers {kind} {bare!r}, "
                                            f"a built-in name: its {kind} is {spec.qualified_name!r}")
                    spec = replace(spec, name=spec.qualified_name)
                self[spec.name] = self.qualified[spec.qualified_name] = spec

    def _ambiguity(self, name: object) -> AmbiguousNameError | None:
        names = self.ambiguous.get(name) if isinstance(name, str) else None
        return None if names is None else AmbiguousNameError(
            f"{self.kind} name {name!r} is ambiguous: it is registered as {' and '.join(names)}; use one of these")

    def __contains__(self, name: object) -> bool:
        error = self._ambiguity(name)
        if error is not None:
            raise error
        return super().__contains__(name) or name in self.qualified

    def __missing__(self, name: str) -> Any:
        error = self._ambiguity(name)
        if error is not None:
            raise error
        if name in self.qualified:
            return self.qualified[name]
        raise KeyError(name)


@dataclass
class Registry:
    """Everything the enabled plugins registered, with the plugins' own reports."""

    tasks: dict[str, TaskSpec]
    models: dict[str, ModelSpec]
    plugins: list[PluginInfo]
    notes: list[str] = field(default_factory=list)  # the host's warnings: unknown plugin names, old contracts

    def task(self, name: str) -> TaskSpec:
        if name not in self.tasks:
            raise unknown_name("task", name, self.tasks)
        return self.tasks[name]

    def model(self, name: str) -> ModelSpec:
        if name not in self.models:
            raise unknown_name("model", name, self.models)
        return self.models[name]

    def warnings(self) -> list[str]:
        """One line per plugin that failed, for commands other than ``plugins``."""
        return [
            f"plugin {p.name!r} ({p.distribution}) failed and was skipped: {p.error}; see `tokbench plugins`"
            for p in self.plugins
            if p.status == "error"
        ]


def _names(env: Mapping[str, str], key: str) -> set[str] | None:
    raw = env.get(key)
    if raw is None or not raw.strip():
        return None
    return {part.strip() for part in raw.split(",") if part.strip()}


def _unknown_plugin_names(env: Mapping[str, str], names: set[str]) -> list[str]:
    """A warning per name in the allow- or block-list that no installed plugin has."""
    notes = []
    for key in (ALLOW_ENV, BLOCK_ENV):
        for name in sorted((_names(env, key) or set()) - names):
            notes.append(f"{key} names {name!r}, which no installed plugin has{did_you_mean(name, names)}; "
                         f"plugin names are those `tokbench plugins` shows: {', '.join(sorted(names))}")
    return notes


def _contract(plugin: object) -> int:
    """The contract the hook module declares (1 where it declares none); a contract this host does not serve
    raises ``ValueError`` with the one line to show."""
    declared = getattr(plugin, hookspecs.CONTRACT_ATTRIBUTE, hookspecs.OLDEST_CONTRACT)
    if isinstance(declared, bool) or not isinstance(declared, int):
        raise ValueError(f"{hookspecs.CONTRACT_ATTRIBUTE} = {reprlib.repr(declared)} is not a contract number; "
                         f"declare {hookspecs.CONTRACT_ATTRIBUTE} = {hookspecs.CONTRACT} (see {hookspecs.MIGRATION})")
    if declared > hookspecs.CONTRACT:
        raise ValueError(f"written for contract {declared}, this tokbench serves contracts "
                         f"{hookspecs.OLDEST_CONTRACT} to {hookspecs.CONTRACT}: upgrade tokbench")
    if declared < hookspecs.OLDEST_CONTRACT:
        raise ValueError(f"written for contract {declared}, no longer served; migrate it to contract "
                         f"{hookspecs.CONTRACT} (see {hookspecs.MIGRATION})")
    return declared


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".splitlines()[0]


def _timeout(env: Mapping[str, str]) -> float:
    raw = env.get(TIMEOUT_ENV, "").strip()
    if not raw:
        return DEFAULT_TIMEOUT_SECONDS
    try:
        seconds = float(raw)
    except ValueError:
        seconds = 0.0
    if not 0 < seconds < float("inf"):
        raise UsageError(f"{TIMEOUT_ENV}={raw!r}: expected a number of seconds > 0")
    return seconds


def _refused_exit(status: int) -> None:
    """What ``os._exit`` does while a plugin loads: raise, so that the plugin is reported as failed."""
    raise RuntimeError(f"called os._exit({status})")


def _bounded(call: Callable[[], Any], seconds: float) -> Any:
    """``call()`` in a daemon thread: its result, or what it raised (``SystemExit`` too), or ``TimeoutError``
    after ``seconds``, leaving the thread behind (a daemon thread never keeps the process alive)."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller, in its own thread
            outcome["error"] = exc

    thread = threading.Thread(target=target, name="tokbench-plugin", daemon=True)
    real_exit = os._exit
    os._exit = _refused_exit  # type: ignore[assignment]  # a plugin's os._exit would end tokbench with no word
    try:
        thread.start()
        thread.join(seconds)
    finally:
        os._exit = real_exit
    if thread.is_alive():
        raise TimeoutError(f"did not finish within {seconds:g} s (see {TIMEOUT_ENV})")
    if isinstance(outcome.get("error"), KeyboardInterrupt):  # the plugin's own: a real Ctrl+C lands in join()
        raise RuntimeError("raised KeyboardInterrupt") from outcome["error"]
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def _new_manager() -> pluggy.PluginManager:
    manager = pluggy.PluginManager(hookspecs.PROJECT)
    manager.add_hookspecs(hookspecs)
    return manager


def _valid_plugin_name(name: str) -> bool:
    """An entry-point name is the PLUGIN of qualified names ``PLUGIN:NAME``, which head record file names: it
    follows the rule of task and model names."""
    try:
        check_name("plugin", name)
    except ValueError:
        return False
    return ":" not in name


def _unknown_hooks(manager: pluggy.PluginManager, plugin: object) -> list[str]:
    """Names of the hook implementations in ``plugin`` that no hookspec declares."""
    unknown = []
    for attr in dir(plugin):
        if manager.parse_hookimpl_opts(plugin, attr) is not None and attr not in _HOOKS:
            unknown.append(attr)
    return unknown


def load_registry(
    eps: Iterable[EntryPoint] | None = None, env: Mapping[str, str] | None = None
) -> Registry:
    """Load every enabled plugin and return what they registered.

    ``eps`` and ``env`` default to the installed entry points and ``os.environ``;
    tests pass their own.
    """
    env = os.environ if env is None else env
    eps = entry_points(group=ENTRY_POINT_GROUP) if eps is None else eps
    allow, block, seconds = _names(env, ALLOW_ENV), _names(env, BLOCK_ENV), _timeout(env)
    manager = _new_manager()
    infos: dict[str, PluginInfo] = {}
    refused: list[PluginInfo] = []  # entry points whose name another distribution has
    eps = sorted(eps, key=lambda e: e.name)
    notes = _unknown_plugin_names(env, {ep.name for ep in eps})
    for ep in eps:
        dist = ep.dist
        info = PluginInfo(ep.name, dist.name if dist else "?", dist.version if dist else "?", ep.value)
        if ep.name in infos:  # two distributions with one entry-point name: the first keeps it
            info.status, info.error = "error", (f"refused: the entry-point name {ep.name!r} is taken by "
                                                f"{infos[ep.name].distribution}")
            refused.append(info)
            continue
        infos[ep.name] = info
        if (allow is not None and ep.name not in allow) or (block is not None and ep.name in block):
            info.status = "disabled"
            continue
        if not _valid_plugin_name(ep.name):
            info.status, info.error = "error", (f"refused: entry-point name {ep.name!r} is not allowed: like task "
                                                "and model names, letters, digits, '.', '_' and '-' only, at most 64 "
                                                "characters, starting with a letter or digit")
            continue
        try:
            plugin = _bounded(ep.load, seconds)
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - any failure of a third-party import is isolated
            info.status, info.error = "error", f"import failed: {_describe(exc)}"
            continue
        try:
            info.contract = _contract(plugin)
        except ValueError as exc:
            info.status, info.error = "error", f"refused: {exc}"
            continue
        if info.contract < hookspecs.CONTRACT:
            notes.append(f"plugin {ep.name!r} ({info.distribution}) declares no {hookspecs.CONTRACT_ATTRIBUTE}: it "
                         f"runs as contract {info.contract} through an adapter, and tokbench run names each change to make; see "
                         f"{hookspecs.MIGRATION}")
        unknown = _unknown_hooks(manager, plugin)
        if unknown:
            hint = "".join(did_you_mean(u, _HOOKS) for u in unknown)
            raise PluginConflictError(
                f"plugin {ep.name!r} ({info.distribution}) implements unknown hook(s) {', '.join(unknown)}{hint}; "
                f"known hooks: {', '.join(_HOOKS)}; disable it with {BLOCK_ENV}={ep.name}"
            )
        try:
            manager.register(plugin, name=ep.name)
        except ValueError as exc:  # pluggy's: one module named by two entry points
            info.status, info.error = "error", f"refused: {_describe(exc)}"
            continue

    registered: dict[type, list[Any]] = {TaskSpec: [], ModelSpec: []}
    for hook_name, spec_type in _HOOKS.items():
        for impl in getattr(manager.hook, hook_name).get_hookimpls():
            info = infos[impl.plugin_name]
            info.hooks.append(hook_name)
            staged: list[Any] = []
            try:
                _bounded(partial(impl.function, **{arg: staged.append for arg in impl.argnames}), seconds)
                for spec in staged:
                    if not isinstance(spec, spec_type):
                        raise TypeError(f"{hook_name} expects {spec_type.__name__} objects, got {type(spec).__name__}")
                    check_name(spec_type.kind, spec.name)  # names head record file names: no '/', no 300 characters
                    if ":" in spec.name:  # the separator of qualified names
                        raise ValueError(f"{spec_type.kind} name {spec.name!r} is not allowed: no ':'")
                    if [other.name for other in staged].count(spec.name) > 1:
                        raise ValueError(f"{spec_type.kind} name {spec.name!r} is registered twice")
            except (Exception, SystemExit) as exc:  # noqa: BLE001 - a failing hook must not sink the others
                info.status, info.error = "error", f"{hook_name} failed: {_describe(exc)}"
                continue
            registered[spec_type] += [replace(spec, plugin=info.distribution, entry_point=info.name,
                                              contract=info.contract) for spec in staged]
    tasks, models = SpecIndex("task", registered[TaskSpec]), SpecIndex("model", registered[ModelSpec])
    for index in (tasks, models):
        notes += index.renamed
        for name, spec in index.items():
            (infos[spec.entry_point].tasks if index is tasks else infos[spec.entry_point].models).append(name)
    return Registry(tasks, models, [*infos.values(), *refused], notes)


@lru_cache(maxsize=1)
def registry() -> Registry:
    """The registry of the installed plugins, loaded once per process."""
    return load_registry()
