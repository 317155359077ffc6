"""The plugin host: load entry points one by one, call their hooks, build the registry.

Every task and model, built-in or third-party, arrives through an entry point
in the ``tokbench`` group; there is no private path for the built-ins.

Faults are isolated per plugin: a plugin that fails to import, raises in a hook
or calls ``sys.exit`` or ``os._exit`` there, or does not finish importing or registering within
the time limit, is recorded with its error and everything else keeps working
(a plugin that hangs is left behind in a daemon thread). Contract
violations that would make results ambiguous (a hook that does not exist, a
task or model name registered twice) stop the command with a clear message
that names the plugins and the environment variable that disables them.

Environment variables:
    TOKBENCH_PLUGINS           comma-separated allow-list of plugin names; when set,
                               only these plugins load.
    TOKBENCH_DISABLE_PLUGINS   comma-separated block-list of plugin names.
    TOKBENCH_PLUGIN_TIMEOUT    seconds each plugin may take to import, and each of its
                               hooks to register (default 30).
"""
from __future__ import annotations

import os
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
    hooks: list[str] = field(default_factory=list)
    tasks: list[str] = field(default_factory=list)
    models: list[str] = field(default_factory=list)
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Registry:
    """Everything the enabled plugins registered, with the plugins' own reports."""

    tasks: dict[str, TaskSpec]
    models: dict[str, ModelSpec]
    plugins: list[PluginInfo]

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
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def _new_manager() -> pluggy.PluginManager:
    manager = pluggy.PluginManager(hookspecs.PROJECT)
    manager.add_hookspecs(hookspecs)
    return manager


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
    for ep in sorted(eps, key=lambda e: e.name):
        dist = ep.dist
        info = PluginInfo(ep.name, dist.name if dist else "?", dist.version if dist else "?", ep.value)
        infos[ep.name] = info
        if (allow is not None and ep.name not in allow) or (block is not None and ep.name in block):
            info.status = "disabled"
            continue
        try:
            plugin = _bounded(ep.load, seconds)
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - any failure of a third-party import is isolated
            info.status, info.error = "error", f"import failed: {_describe(exc)}"
            continue
        unknown = _unknown_hooks(manager, plugin)
        if unknown:
            hint = "".join(did_you_mean(u, _HOOKS) for u in unknown)
            raise PluginConflictError(
                f"plugin {ep.name!r} ({info.distribution}) implements unknown hook(s) {', '.join(unknown)}{hint}; "
                f"known hooks: {', '.join(_HOOKS)}; disable it with {BLOCK_ENV}={ep.name}"
            )
        manager.register(plugin, name=ep.name)

    tasks: dict[str, TaskSpec] = {}
    models: dict[str, ModelSpec] = {}
    for hook_name, spec_type in _HOOKS.items():
        target: dict[str, Any] = tasks if spec_type is TaskSpec else models
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
            except (Exception, SystemExit) as exc:  # noqa: BLE001 - a failing hook must not sink the others
                info.status, info.error = "error", f"{hook_name} failed: {_describe(exc)}"
                continue
            for spec in staged:
                spec = replace(spec, plugin=info.distribution)
                if spec.name in target:
                    other = next(p for p in infos.values() if spec.name in (p.tasks + p.models))
                    raise PluginConflictError(
                        f"{spec_type.kind} name {spec.name!r} is registered by both plugin {other.name!r} "
                        f"({other.distribution}) and plugin {info.name!r} ({info.distribution}); "
                        f"disable one with {BLOCK_ENV}=NAME"
                    )
                target[spec.name] = spec
                (info.tasks if spec_type is TaskSpec else info.models).append(spec.name)
    return Registry(tasks, models, list(infos.values()))


@lru_cache(maxsize=1)
def registry() -> Registry:
    """The registry of the installed plugins, loaded once per process."""
    return load_registry()
