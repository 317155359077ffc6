"""Suites: TOML files that say which pairings ``tokbench run`` trains.

A suite is a list of grid blocks. Each block crosses its tasks, models and
seeds, with per-task and per-model parameters and recipe overrides; a top-level
budget caps every recipe's steps. The format is documented in ``docs/suites.md``.

This module only parses and checks the file's structure. Names and parameter
values are checked against the plugin registry when the runner expands the
grid; :meth:`Suite.where` gives it the file and line of each key for its errors.
"""
from __future__ import annotations

import math
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from tokbench.errors import UsageError, did_you_mean, unknown_name
from tokbench.outputs import LOGGERS
from tokbench.storage import read_regular

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

WILDCARD = "*"
MAX_SUITE_BYTES = 1_000_000
MAX_SEED = 2**63
_TOP_KEYS = ("description", "seeds", "budget", "adaptive", "outputs", "grid")
_BUDGET_KEYS = ("max_steps",)
_ADAPTIVE_KEYS = ("target_ci", "max_seeds")
_OUTPUTS_KEYS = ("loggers", "log_samples")  # what a run writes besides its records (tokbench.outputs)
TASK_TRAIN = "task"  # [grid.train.task.NAME]: recipe overrides for one task of a block (a name or a pattern)
_BLOCK_KEYS = ("tasks", "models", "skip_tasks", "skip_models", "model_origin", "seeds", "task", "model", "train",
               "ladder", "sweep", "evaluate")
ORIGINS = ("builtin", "plugin")  # where a model comes from: tokbench's own distribution, or a plugin's
MULTIPLE = re.compile(r"^x([1-9][0-9]*)$")  # an evaluation value as a multiple of the training value: "x2"
_SWEEP_KEYS = ("lr_factors", "weight_decay")
SWEEP_BY_MODEL = "model"  # [grid.sweep.model.NAME]: one model's sweep in place of the block's (a name or a pattern)

KeyPath = tuple[str | int, ...]


class SuiteError(UsageError):
    """A suite file that is malformed; the message starts with ``file:line``."""


@dataclass(frozen=True)
class GridBlock:
    """One ``[[grid]]`` block: tasks x models x seeds with their parameters.

    ``tasks``/``models`` hold names or glob patterns (``"*"``, ``"attn-*"``);
    ``skip_tasks``/``skip_models`` (names or patterns) take members back out, so a
    ``"*"`` block can leave to another block the models it trains differently;
    ``task_params``/``model_params`` map a name, or ``"*"`` for every member of the
    block that declares the key, to parameter values; ``train`` overrides the recipe of every model
    of the block, and its tables (``[grid.train.mamba]``, a name or pattern) that of the models they name.
    ``model_origin``, when set, keeps only the models of that origin (:data:`ORIGINS`): ``"plugin"`` selects what
    plugins add whatever their names, ``"builtin"`` only tokbench's own.
    ``ladders`` map a task name to its ladder: difficulty parameters, each with one value per
    rung (all lists of one task the same length, easiest rung first); the block trains every rung.
    ``sweep`` is a validation-selected sweep for every model of the block, relative to its own
    recipe: ``lr_factors`` multiply the recipe's lr, ``weight_decay`` lists absolute values;
    ``model_sweeps`` (``[grid.sweep.model.NAME]``, a name or pattern) replace those keys for the models they name.
    ``evaluate`` maps a task parameter (an evaluation axis, e.g. ``context_length``) to the values a
    trained model is also evaluated at, each one setting: plain integers, or ``"xN"`` for N times the
    training value (:func:`evaluation_value`).
    """

    index: int
    tasks: tuple[str, ...]
    models: tuple[str, ...]
    seeds: Sequence[int]
    task_params: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    model_params: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    train: Mapping[str, Any] = field(default_factory=dict)
    skip_tasks: tuple[str, ...] = ()
    skip_models: tuple[str, ...] = ()
    model_origin: str | None = None
    ladders: Mapping[str, Mapping[str, list[Any]]] = field(default_factory=dict)
    sweep: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    model_sweeps: Mapping[str, Mapping[str, tuple[float, ...]]] = field(default_factory=dict)
    evaluate: Mapping[str, tuple[int | str, ...]] = field(default_factory=dict)


def evaluation_value(value: Any) -> int | str:
    """One evaluation value as written in a suite or after ``--evaluate``: an integer, or ``"xN"`` (N >= 1 times
    the training value); raises ``ValueError`` saying what is allowed."""
    if isinstance(value, str):
        text = value.strip()
        if MULTIPLE.match(text):
            return text
        try:
            value = int(text)
        except ValueError:
            pass
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise ValueError(f'expected an integer or a multiple of the training value like "x2", got {value!r}')


def evaluation_setting(task_params: Mapping[str, Any], axis: str, value: int | str) -> Any:
    """The value of ``axis`` that ``value`` means for a task trained at ``task_params``: ``"xN"`` is N times the
    training value; a task without the parameter keeps it as written (its evaluation is not applicable)."""
    multiple = MULTIPLE.match(value) if isinstance(value, str) else None
    if multiple is None or axis not in task_params:
        return value
    return int(multiple.group(1)) * task_params[axis]


@dataclass(frozen=True)
class Suite:
    name: str
    origin: str  # the file it came from, for messages
    description: str
    max_steps: int | None
    blocks: tuple[GridBlock, ...]
    lines: Mapping[KeyPath, int] = field(default_factory=dict, repr=False)
    adaptive: Mapping[str, Any] = field(default_factory=dict)  # [adaptive] target_ci, max_seeds (tokbench.adaptive)
    outputs: Mapping[str, Any] = field(default_factory=dict)  # [outputs] loggers, log_samples (tokbench.outputs)

    def where(self, *path: str | int) -> str:
        """``file:line`` of the key at ``path`` (or of its nearest enclosing table)."""
        return locate(self.origin, self.lines, path)


def locate(origin: str, lines: Mapping[KeyPath, int], path: KeyPath) -> str:
    for end in range(len(path), 0, -1):
        if path[:end] in lines:
            return f"{origin}:{lines[path[:end]]}"
    return origin


def is_pattern(entry: str) -> bool:
    return any(c in entry for c in "*?[")


def builtin_suites() -> list[str]:
    folder = resources.files("tokbench") / "suites"
    return sorted(p.name[: -len(".toml")] for p in folder.iterdir() if p.name.endswith(".toml"))


def load_suite(name_or_path: str) -> Suite:
    """A built-in suite by name, or a suite file by path."""
    path = Path(name_or_path)
    if path.suffix == ".toml" or path.is_file():
        if not path.exists():
            raise SuiteError(f"suite file {name_or_path} does not exist")
        return parse_suite(_read_suite(path), origin=str(path), name=path.stem)
    if name_or_path not in builtin_suites():
        raise unknown_name("suite", name_or_path, builtin_suites())
    text = (resources.files("tokbench") / "suites" / f"{name_or_path}.toml").read_text(encoding="utf-8")
    return parse_suite(text, origin=f"suite {name_or_path!r} ({name_or_path}.toml)", name=name_or_path)


def _read_suite(path: Path) -> str:
    """The text of a suite file: a regular UTF-8 file of at most ``MAX_SUITE_BYTES``."""
    try:
        return read_regular(path, MAX_SUITE_BYTES).decode("utf-8")
    except ValueError as exc:  # UnicodeDecodeError included
        reason = "not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else str(exc)
        raise SuiteError(f"{path}: {reason}; a suite is a UTF-8 TOML file of at most {MAX_SUITE_BYTES} bytes") from None


# ---- key positions ---------------------------------------------------------------------------------------------

_HEADER = re.compile(r"^\s*(\[\[?)\s*(.+?)\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(r"""^\s*((?:[A-Za-z0-9_\-]+|"[^"]*"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_\-]+|"[^"]*"|'[^']*'))*)\s*=""")
_KEY_PART = re.compile(r"""[A-Za-z0-9_\-]+|"[^"]*"|'[^']*'""")


def _dotted(text: str) -> tuple[str, ...]:
    return tuple(part.strip("\"'") for part in _KEY_PART.findall(text))


def key_lines(text: str) -> dict[KeyPath, int]:
    """The line of every key and table header, by path; array-of-table entries are indexed.

    tomllib parses but does not report positions, so this light scan finds them
    for error messages. It handles headers and ``key = value`` lines, which is
    what suites use; anything it cannot place falls back to its enclosing table.
    """
    lines: dict[KeyPath, int] = {}
    arrays: dict[KeyPath, int] = {}  # array of tables -> index of its current element
    table: KeyPath = ()
    for number, line in enumerate(text.splitlines(), 1):
        header = _HEADER.match(line) if line.lstrip().startswith("[") else None
        if header:
            parts = _dotted(header.group(2))
            table = ()
            for i, part in enumerate(parts):
                table += (part,)
                if header.group(1) == "[[" and i == len(parts) - 1:
                    arrays[table] = arrays.get(table, -1) + 1
                if table in arrays:
                    table += (arrays[table],)
            lines.setdefault(table, number)
        elif key := _KEY.match(line):
            lines.setdefault(table + _dotted(key.group(1)), number)
    return lines


# ---- structure ---------------------------------------------------------------------------------------------------

class _Checker:
    def __init__(self, origin: str, lines: Mapping[KeyPath, int]) -> None:
        self.origin, self.lines = origin, lines

    def fail(self, path: KeyPath, message: str) -> SuiteError:
        return SuiteError(f"{locate(self.origin, self.lines, path)}: {message}")

    def keys(self, table: Mapping[str, Any], allowed: tuple[str, ...], path: KeyPath, what: str) -> None:
        for key in table:
            if key not in allowed:
                raise self.fail(path + (key,), f"unknown key {key!r} in {what}{did_you_mean(key, allowed)}; "
                                               f"allowed: {', '.join(allowed)}")

    def seeds(self, value: Any, path: KeyPath) -> Sequence[int]:
        if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
            return range(value)  # a range, not a tuple: a huge count costs nothing until it is enumerated
        if (isinstance(value, list) and value
                and all(isinstance(s, int) and not isinstance(s, bool) and 0 <= s < MAX_SEED for s in value)
                and len(set(value)) == len(value)):
            return tuple(value)
        shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:80] + "..."
        raise self.fail(path, "seeds must be a count N >= 1 (seeds 0..N-1) or a list of distinct seeds in "
                              f"[0, 2**63), got {shown}")

    def names(self, value: Any, path: KeyPath) -> tuple[str, ...]:
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
            raise self.fail(path, f'expected "*" or a list of names or patterns, got {value!r}')
        return tuple(value)

    def choice(self, value: Any, allowed: tuple[str, ...], path: KeyPath) -> str | None:
        if value is not None and value not in allowed:
            raise self.fail(path, f"{path[-1]} must be one of {', '.join(map(repr, allowed))}, got {value!r}")
        return value

    def tables(self, value: Any, path: KeyPath) -> dict[str, dict[str, Any]]:
        """``{name: {param: value}}`` where every value is a scalar or a list of scalars."""
        if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
            raise self.fail(path, "expected tables of parameters, e.g. [grid.task.random-walk] or [grid.task.\"*\"]")
        for name, params in value.items():
            for key, item in params.items():
                self.value(item, path + (name, key))
        return value

    def ladders(self, value: Any, path: KeyPath) -> dict[str, dict[str, list[Any]]]:
        """``{task: {param: [value per rung]}}``: lists of at least two scalars, one length per task."""
        if not isinstance(value, dict) or not all(isinstance(v, dict) and v for v in value.values()):
            raise self.fail(path, "expected a ladder per task, e.g. [grid.ladder.mqar] num_kv_pairs = [2, 4, 8]")
        for name, params in value.items():
            lengths = set()
            for key, item in params.items():
                if not (isinstance(item, list) and len(item) >= 2
                        and all(isinstance(x, (bool, int, float, str)) for x in item)):
                    raise self.fail(path + (name, key), f"{key} must list one value per rung (at least two), "
                                                        f"easiest first, got {item!r}")
                lengths.add(len(item))
            if len(lengths) > 1:
                raise self.fail(path + (name,), f"the ladder of {name!r} lists {sorted(lengths)} values: every "
                                                "parameter needs one value per rung")
        return value

    def sweep(self, value: Any, path: KeyPath) -> dict[str, tuple[float, ...]]:
        """``{lr_factors: [..], weight_decay: [..]}``: non-empty lists of finite numbers, factors > 0 (the block's
        sweep; its ``model`` tables are read by :meth:`model_sweeps`)."""
        if not isinstance(value, dict):
            raise self.fail(path, "expected [grid.sweep] with lr_factors = [...] and/or weight_decay = [...]")
        self.keys(value, (*_SWEEP_KEYS, SWEEP_BY_MODEL), path, "[grid.sweep]")
        return self._sweep_lists({k: v for k, v in value.items() if k != SWEEP_BY_MODEL}, path)

    def model_sweeps(self, value: Any, path: KeyPath) -> dict[str, dict[str, tuple[float, ...]]]:
        """``[grid.sweep.model.NAME]`` tables: each a sweep of the same keys, for the models NAME names."""
        tables = value.get(SWEEP_BY_MODEL, {}) if isinstance(value, dict) else {}
        if not isinstance(tables, dict) or not all(isinstance(t, dict) and t for t in tables.values()):
            raise self.fail(path + (SWEEP_BY_MODEL,), "expected [grid.sweep.model.NAME] tables with lr_factors = "
                                                     "[...] and/or weight_decay = [...]")
        swept = {}
        for name, table in tables.items():
            self.keys(table, _SWEEP_KEYS, path + (SWEEP_BY_MODEL, name), f"[grid.sweep.model.{name}]")
            swept[name] = self._sweep_lists(table, path + (SWEEP_BY_MODEL, name))
        return swept

    def _sweep_lists(self, value: Mapping[str, Any], path: KeyPath) -> dict[str, tuple[float, ...]]:
        sweep = {}
        for key, items in value.items():
            low_ok = (lambda x: x > 0) if key == "lr_factors" else (lambda x: x >= 0)
            if not (isinstance(items, list) and items and all(
                    isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and low_ok(x)
                    for x in items)):
                bound = "> 0" if key == "lr_factors" else ">= 0"
                raise self.fail(path + (key,), f"{key} must be a non-empty list of numbers {bound}, got {items!r}")
            sweep[key] = tuple(float(x) for x in items)
        return sweep

    def evaluate(self, value: Any, path: KeyPath) -> dict[str, tuple[int | str, ...]]:
        """``{axis: [values]}``: non-empty lists of integers or ``"xN"`` multiples."""
        if not isinstance(value, dict) or not value:
            raise self.fail(path, 'expected [grid.evaluate] with lists of settings, e.g. context_length = ["x2", "x4"]')
        settings = {}
        for axis, items in value.items():
            if not isinstance(items, list) or not items:
                raise self.fail(path + (axis,), f'{axis} must list the values to evaluate at, e.g. ["x2", "x4"] or '
                                                f"[64, 128], got {items!r}")
            try:
                settings[axis] = tuple(evaluation_value(item) for item in items)
            except ValueError as exc:
                raise self.fail(path + (axis,), f"{axis}: {exc}") from None
        return settings

    def value(self, item: Any, path: KeyPath) -> None:
        scalar = (bool, int, float, str)
        if not (isinstance(item, scalar) or (isinstance(item, list) and all(isinstance(x, scalar) for x in item))):
            raise self.fail(path, f"{path[-1]} must be a number, string, boolean or list of numbers")


def parse_suite(text: str, origin: str, name: str) -> Suite:
    """Parse suite TOML; unknown keys and malformed values raise :class:`SuiteError` with ``file:line``."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SuiteError(f"{origin}: invalid TOML: {exc}") from None
    except RecursionError:  # thousands of nested brackets: the parser recurses once per level
        raise SuiteError(f"{origin}: invalid TOML: nested too deeply") from None
    check = _Checker(origin, key_lines(text))
    check.keys(data, _TOP_KEYS, (), "the suite")
    description = data.get("description", "")
    if not isinstance(description, str):
        raise check.fail(("description",), "description must be a string")
    default_seeds = check.seeds(data["seeds"], ("seeds",)) if "seeds" in data else None

    budget = data.get("budget", {})
    if not isinstance(budget, dict):
        raise check.fail(("budget",), "budget must be a table, e.g. [budget] max_steps = 100")
    check.keys(budget, _BUDGET_KEYS, ("budget",), "[budget]")
    max_steps = budget.get("max_steps")
    if max_steps is not None and (not isinstance(max_steps, int) or isinstance(max_steps, bool) or max_steps < 0):
        raise check.fail(("budget", "max_steps"), f"max_steps must be an integer >= 0, got {max_steps!r}")

    adaptive = data.get("adaptive", {})
    if not isinstance(adaptive, dict):
        raise check.fail(("adaptive",), "adaptive must be a table, e.g. [adaptive] target_ci = 0.02")
    check.keys(adaptive, _ADAPTIVE_KEYS, ("adaptive",), "[adaptive]")

    outputs = data.get("outputs", {})
    if not isinstance(outputs, dict):
        raise check.fail(("outputs",), 'outputs must be a table, e.g. [outputs] loggers = ["csv"]')
    check.keys(outputs, _OUTPUTS_KEYS, ("outputs",), "[outputs]")
    loggers = outputs.get("loggers", [])
    if not (isinstance(loggers, list) and all(name in LOGGERS for name in loggers)):
        raise check.fail(("outputs", "loggers"), f"loggers must list some of {', '.join(LOGGERS)}, got {loggers!r}")
    if not isinstance(outputs.get("log_samples", False), bool):
        raise check.fail(("outputs", "log_samples"), "log_samples must be true or false")

    grid = data.get("grid")
    if not isinstance(grid, list) or not grid:
        raise check.fail(("grid",), "a suite needs at least one [[grid]] block")
    blocks = []
    for index, block in enumerate(grid):
        path: KeyPath = ("grid", index)
        if not isinstance(block, dict):
            raise check.fail(("grid",), f"grid must be [[grid]] tables, got {block!r} as block {index + 1}")
        check.keys(block, _BLOCK_KEYS, path, f"[[grid]] block {index + 1}")
        for required in ("tasks", "models"):
            if required not in block:
                raise check.fail(path, f"[[grid]] block {index + 1} needs {required!r} (a list of names, or \"*\")")
        if "seeds" in block:
            seeds = check.seeds(block["seeds"], path + ("seeds",))
        elif default_seeds is not None:
            seeds = default_seeds
        else:
            raise check.fail(path, f"[[grid]] block {index + 1} has no seeds; set seeds = N at the top or in the block")
        train = block.get("train", {})
        if not isinstance(train, dict):
            raise check.fail(path + ("train",),
                             "train must be a table of recipe overrides, e.g. [grid.train] steps = 100")
        for key, item in train.items():
            if key == TASK_TRAIN and isinstance(item, dict):  # [grid.train.task.NAME]: overrides for one task
                for name, table in item.items():
                    if not isinstance(table, dict):
                        raise check.fail(path + ("train", key, name), f"expected a table [grid.train.task.{name}] "
                                         "of recipe overrides for that task, e.g. steps = 3000")
                    for sub, value in table.items():
                        check.value(value, path + ("train", key, name, sub))
            elif isinstance(item, dict):  # [grid.train.NAME]: overrides for one model (a name or a pattern)
                for sub, value in item.items():
                    check.value(value, path + ("train", key, sub))
            else:
                check.value(item, path + ("train", key))
        blocks.append(GridBlock(
            index=index,
            tasks=check.names(block["tasks"], path + ("tasks",)),
            models=check.names(block["models"], path + ("models",)),
            seeds=seeds,
            task_params=check.tables(block.get("task", {}), path + ("task",)),
            model_params=check.tables(block.get("model", {}), path + ("model",)),
            train=train,
            skip_tasks=check.names(block["skip_tasks"], path + ("skip_tasks",)) if "skip_tasks" in block else (),
            skip_models=check.names(block["skip_models"], path + ("skip_models",)) if "skip_models" in block else (),
            model_origin=check.choice(block.get("model_origin"), ORIGINS, path + ("model_origin",)),
            ladders=check.ladders(block["ladder"], path + ("ladder",)) if "ladder" in block else {},
            sweep=check.sweep(block["sweep"], path + ("sweep",)) if "sweep" in block else {},
            model_sweeps=check.model_sweeps(block["sweep"], path + ("sweep",)) if "sweep" in block else {},
            evaluate=check.evaluate(block["evaluate"], path + ("evaluate",)) if "evaluate" in block else {},
        ))
    return Suite(name, origin, description, max_steps, tuple(blocks), check.lines, adaptive, outputs)
