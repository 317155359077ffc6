"""Expand a suite into pairings: names and patterns, parameters, ``--set`` routing, filters, shards.

Everything here is light (no torch): the parent of a run expands and checks the
whole grid before any worker starts, so a bad name or parameter ends the
command at once with one line instead of failing every pairing.

Parameter precedence for one pairing, later wins: the spec's defaults; the
recipe step cap of the suite's ``[budget]``; the block's ``"*"`` table; the
block's table for the task or model by name; ``--set``.
"""
from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, TypeVar

from tokbench.errors import ParamError, UnknownNameError, UsageError, did_you_mean, unknown_name
from tokbench.outputs import RunOutputs
from tokbench.params import parse_assignments
from tokbench.plugins import Registry, origin
from tokbench.results import SeedHashes, canonical_json, identity, record_filename
from tokbench.specs import RECIPE_PARAMS, ModelSpec, Recipe, TaskSpec
from tokbench.suites import (SWEEP_BY_MODEL, TASK_TRAIN, WILDCARD, GridBlock, Suite, evaluation_setting,
                             evaluation_value, is_pattern, load_suite)

NAMESPACES = ("task", "model", "train")
RECIPE_KEYS = tuple(p.name for p in RECIPE_PARAMS)
MAX_PAIRINGS = 2_000_000  # a plan of this size takes seconds and about 1 GB; a typo like seeds = 10**12 never ends
T = TypeVar("T")


@dataclass(frozen=True)
class Rung:
    """Where a variant sits on its suite's ladder: rung ``index`` (0 = easiest) of ``count``, and the
    laddered task parameters' values there. Written into the record as ``ladder``; not part of the identity."""

    index: int
    count: int
    axes: Mapping[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"rung": self.index, "rungs": self.count, "axes": dict(self.axes)}


@dataclass(frozen=True, eq=False)
class Variant:
    """A task and a model with resolved parameters and a recipe: the pairings of one grid cell, but for the seed.

    Everything that does not depend on the seed is computed once here and shared by the
    variant's pairings, so a grid of a million seeds costs one small object per pairing.
    """

    task_spec: TaskSpec
    model_spec: ModelSpec
    task_params: dict[str, Any]
    model_params: dict[str, Any]
    recipe: Recipe
    rung: Rung | None = None
    evaluate: tuple[dict[str, Any], ...] = ()
    outputs: RunOutputs = RunOutputs()  # training logs and per-sample outputs: not part of the identity

    @cached_property
    def params(self) -> dict[str, Any]:
        """The identity's ``params``. A model that is not trained has no recipe in it (``train`` is
        ``{}``), so ``--set train.steps=...`` does not change its config hash (and see :meth:`Recipe.identity`).
        ``evaluate``, the extra evaluation settings (override dicts in declared order), is there only when set."""
        train = self.recipe.identity() if self.model_spec.trained else {}
        params: dict[str, Any] = {"task": self.task_params, "model": self.model_params, "train": train}
        if self.evaluate:
            params["evaluate"] = [dict(overrides) for overrides in self.evaluate]
        return params

    @cached_property
    def hashes(self) -> SeedHashes:
        task, model = self.task_spec, self.model_spec
        return SeedHashes(identity(task.name, task.version, model.name, model.version, self.params, 0))

    @cached_property
    def not_applicable(self) -> str | None:
        """Why the model cannot be paired with the task (the pairing gets a not_applicable record), or None."""
        return self.model_spec.applicability(self.task_spec)


@dataclass(frozen=True, eq=False, slots=True)
class Pairing:
    """One unit of work: a variant (task, model, resolved parameters, recipe) and a seed."""

    variant: Variant
    seed: int
    config_hash: str = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "config_hash", self.variant.hashes(self.seed))

    @classmethod
    def of(cls, task_spec: TaskSpec, model_spec: ModelSpec, task_params: dict[str, Any],
           model_params: dict[str, Any], recipe: Recipe, seed: int) -> Pairing:
        return cls(Variant(task_spec, model_spec, task_params, model_params, recipe), seed)

    task_spec = property(lambda self: self.variant.task_spec)
    model_spec = property(lambda self: self.variant.model_spec)
    task_params = property(lambda self: self.variant.task_params)
    model_params = property(lambda self: self.variant.model_params)
    recipe = property(lambda self: self.variant.recipe)
    not_applicable = property(lambda self: self.variant.not_applicable)

    @property
    def identity(self) -> dict[str, Any]:
        # The variant's params object itself, not a copy: the seeds of a variant share it, which keeps
        # a million identities cheap and lets progress.variant_labels flatten it once.
        task, model = self.task_spec, self.model_spec
        return {"task": task.name, "task_version": task.version, "model": model.name, "model_version": model.version,
                "params": self.variant.params, "seed": self.seed}

    @property
    def header(self) -> dict[str, Any]:
        """The identity with its config hash, as it heads the pairing's record."""
        return {**self.identity, "config_hash": self.config_hash}

    @property
    def filename(self) -> str:
        return record_filename(self.task_spec.name, self.model_spec.name, self.config_hash)

    @property
    def cell(self) -> str:
        """The key of the pairing's cell: its config hash at seed 0, equal for pairings that differ only in the
        seed (task, model, their parameters, recipe and evaluation settings all enter the hash; a ladder's rung
        is its task parameters)."""
        return self.variant.hashes(0)


@dataclass(frozen=True)
class Setting:
    """One ``--set [task.|model.|train.]key=value``; ``namespace`` None reaches every namespace that declares key."""

    namespace: str | None
    key: str
    value: str

    def __str__(self) -> str:
        return f"{self.namespace + '.' if self.namespace else ''}{self.key}={self.value}"


def parse_settings(items: Sequence[str]) -> list[Setting]:
    settings = []
    for key, value in parse_assignments(items).items():
        namespace, dot, rest = key.partition(".")
        if dot and namespace in NAMESPACES and rest:
            if namespace == "train" and rest not in RECIPE_KEYS:
                raise ParamError(f"--set {key}: the training recipe has no parameter {rest!r}"
                                 f"{did_you_mean(rest, RECIPE_KEYS)}; allowed: {', '.join(RECIPE_KEYS)}")
            settings.append(Setting(namespace, rest, value))
        else:
            settings.append(Setting(None, key, value))
    return settings


def _declared(spec: TaskSpec | ModelSpec) -> set[str]:
    return {p.name for p in spec.params}


def _route(settings: Iterable[Setting], task: TaskSpec, model: ModelSpec) -> tuple[dict, dict, dict]:
    """The ``--set`` values that reach this pairing's task, model and recipe."""
    routed: tuple[dict, dict, dict] = ({}, {}, {})
    declared = (_declared(task), _declared(model), set(RECIPE_KEYS))
    for s in settings:
        for namespace, names, target in zip(NAMESPACES, declared, routed):
            if s.namespace in (None, namespace) and s.key in names:
                target[s.key] = s.value
    return routed


def _check_settings_used(settings: Sequence[Setting], pairings: Sequence[Pairing]) -> None:
    """A ``--set`` key that no task, model or recipe in the grid declares is a usage error."""
    tasks = {p.task_spec.name: p.task_spec for p in pairings}
    models = {p.model_spec.name: p.model_spec for p in pairings}
    known = {
        "task": set().union(*map(_declared, tasks.values())),
        "model": set().union(*map(_declared, models.values())),
        "train": set(RECIPE_KEYS),
    }
    for s in settings:
        spaces = NAMESPACES if s.namespace is None else (s.namespace,)
        if not any(s.key in known[ns] for ns in spaces):
            candidates = set().union(*(known[ns] for ns in spaces))
            where = "the grid's tasks, models or recipe" if s.namespace is None else f"the grid's {s.namespace}s"
            raise ParamError(f"--set {s}: no parameter {s.key!r} in {where}{did_you_mean(s.key, candidates)}; "
                             f"see `tokbench show task|model NAME`")


def _located(where: str, build: Callable[[], T]) -> T:
    try:
        return build()
    except ParamError as exc:
        raise ParamError(f"{where}: {exc}") from None


def _select(entries: Sequence[str], registered: Mapping[str, Any], kind: str, where: str) -> list[str]:
    """Registered names matched by ``entries`` (names, qualified names or glob patterns), in order, without
    repeats; a qualified name selects the spec under the name it runs by."""
    selected: list[str] = []
    for entry in entries:
        if is_pattern(entry):
            matches = sorted(fnmatch.filter(registered, entry))
        elif entry in registered:
            matches = [registered[entry].name]
        else:
            raise UnknownNameError(f"{where}: {unknown_name(kind, entry, registered)}")
        selected += [m for m in matches if m not in selected]
    return selected


def _unskipped(names: list[str], skip: Sequence[str]) -> list[str]:
    """``names`` without those a block's ``skip_*`` entries name or match (absent names are no error)."""
    return [n for n in names if not any(fnmatch.fnmatchcase(n, pattern) for pattern in skip)]


def _filter(entries: Sequence[str], registered: Mapping[str, Any], kind: str) -> set[str]:
    """The names that ``--task``/``--model`` keep; a pattern that matches no registered name is a typo."""
    for entry in entries:
        if is_pattern(entry) and not fnmatch.filter(registered, entry):
            raise UnknownNameError(f"--{kind} {entry!r} matches no registered {kind}; allowed: "
                                   f"{', '.join(sorted(registered))}")
    return set(_select(entries, registered, kind, f"--{kind}"))


def _block_params(suite: Suite, block: GridBlock, kind: str, specs: Mapping[str, TaskSpec | ModelSpec],
                  registered: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Per selected name, the parameters the block gives it: its ``"*"`` table, then its own table."""
    table = block.task_params if kind == "task" else block.model_params
    entries = block.tasks if kind == "task" else block.models
    star = table.get(WILDCARD, {})
    for key in star:
        if not any(key in _declared(spec) for spec in specs.values()):
            raise ParamError(f"{suite.where('grid', block.index, kind, WILDCARD, key)}: no {kind} in this block "
                             f"declares a parameter {key!r}")
    for name in table:
        where = suite.where("grid", block.index, kind, name)
        if name == WILDCARD or name in specs:
            continue
        if name in registered:
            raise UsageError(f"{where}: [grid.{kind}.{name}] names a {kind} that this block does not select")
        if not any(map(is_pattern, entries)):  # a wildcard block tolerates tables for plugins that are absent
            raise UsageError(f"{where}: {unknown_name(kind, name, registered)}")
    given: dict[str, dict[str, Any]] = {}
    for name, spec in specs.items():
        own = table.get(name, {})
        given[name] = {k: v for k, v in star.items() if k in _declared(spec)} | dict(own)
        for key, value in given[name].items():
            where = suite.where("grid", block.index, kind, name if key in own else WILDCARD, key)
            _located(where, lambda: spec.resolve({key: value}))
    return given


def _block_ladders(suite: Suite, block: GridBlock, specs: Mapping[str, TaskSpec], registered: Mapping[str, Any],
                   given: Mapping[str, Mapping[str, Any]]) -> dict[str, list[tuple[Rung, dict[str, Any]]]]:
    """Per laddered task of the block, its rungs with the task parameters each one sets.

    A ladder varies only the task's declared difficulty parameters, and none that the block's
    task tables also set; a ladder for a task the block does not select is an error.
    """
    rungs: dict[str, list[tuple[Rung, dict[str, Any]]]] = {}
    for name, ladder in block.ladders.items():
        where = suite.where("grid", block.index, "ladder", name)
        if name not in specs:
            if name in registered and not any(fnmatch.fnmatchcase(name, skip) for skip in block.skip_tasks):
                raise UsageError(f"{where}: [grid.ladder.{name}] names a task that this block does not select")
            if name not in registered and not any(map(is_pattern, block.tasks)):
                raise UsageError(f"{where}: {unknown_name('task', name, registered)}")
            continue  # skipped, or a plugin that a pattern block tolerates being absent
        spec = specs[name]
        for key in ladder:
            at = suite.where("grid", block.index, "ladder", name, key)
            if key not in spec.difficulty:
                axes = ", ".join(spec.difficulty) or "none"
                raise ParamError(f"{at}: a ladder varies only the task's declared difficulty parameters; "
                                 f"{name!r} declares: {axes}")
            if key in given[name]:
                raise ParamError(f"{at}: {key!r} is set both by the ladder and by the block's task table")
        count = len(next(iter(ladder.values())))
        rungs[name] = []
        for index in range(count):
            values = {key: items[index] for key, items in ladder.items()}
            for key, value in values.items():
                _located(suite.where("grid", block.index, "ladder", name, key), lambda: spec.resolve({key: value}))
            rungs[name].append((Rung(index, count, values), values))
    return rungs


def _check_train_tables(suite: Suite, block: GridBlock, specs: Mapping[str, ModelSpec],
                        registered: Mapping[str, Any], tasks: Sequence[str] = ()) -> None:
    """A ``[grid.train.NAME]`` or ``[grid.sweep.model.NAME]`` table must name (or match) a model of the block, like
    ``[grid.model.NAME]``, and a ``[grid.train.task.NAME]`` table a task of the block."""
    for name in block.train.get(TASK_TRAIN, {}) if isinstance(block.train.get(TASK_TRAIN), dict) else ():
        if not any(fnmatch.fnmatchcase(task, name) for task in tasks):
            where = suite.where("grid", block.index, "train", TASK_TRAIN, name)
            raise UsageError(f"{where}: [grid.train.task.{name}] names no task of this block "
                             f"({', '.join(sorted(tasks))})")
    tables = [(("train", name), f"[grid.train.{name}]") for name, table in block.train.items()
              if name != TASK_TRAIN and isinstance(table, dict)]
    tables += [(("sweep", SWEEP_BY_MODEL, name), f"[grid.sweep.model.{name}]") for name in block.model_sweeps]
    for (*keys, name), title in tables:
        if any(fnmatch.fnmatchcase(m, name) for m in specs):
            continue
        where = suite.where("grid", block.index, *keys, name)
        if name in registered:
            if any(fnmatch.fnmatchcase(name, skip) for skip in block.skip_models):
                continue
            raise UsageError(f"{where}: {title} names a model that this block does not select")
        if any(map(is_pattern, block.models)):
            continue  # a plugin that a pattern block tolerates being absent
        raise UsageError(f"{where}: {title} matches no model of this block" if is_pattern(name)
                         else f"{where}: {unknown_name('model', name, registered)}")


DEFAULT_SUITE = "default"  # what `tokbench run` trains when no --suite, --task or --model says otherwise
WIDEST_SUITE = "survey"
# What one machine can hold: more steps than this never finish (at a millisecond a step, 28 hours). The sizes a
# pairing allocates at once, checked at planning (the dry run prints them): a split (train, validation, test, or the
# test split of an evaluation setting) of n sequences of T tokens holds n x T tokens and as many labels at most
# (2 GiB each as int64); a batch holds batch_size x T tokens (a fresh draw holds 10 batches); a split of a task
# scored at every position also holds (n, T, T) attention targets (4 GiB as bools).
MAX_STEPS = 10**8
MAX_SPLIT_TOKENS = 2**28
MAX_BATCH_TOKENS = 2**24
MAX_TARGET_ENTRIES = 2**32
SPLIT_SIZES = ("train_size", "val_size", "test_size")  # the parameters that size a task's splits (Task.split_size)


def _check_held(what: str, value: Any, limit: int, unit: str) -> None:
    """A usage error, in one line, for a number that a machine cannot hold or finish."""
    if isinstance(value, (int, float)) and value > limit:
        raise UsageError(f"{what} is {value:,} {unit}, more than one machine can hold or finish ({limit:,}); "
                         "use a smaller value")


def _context_length(params: Mapping[str, Any]) -> int:
    return max(1, int(params.get("context_length") or 1))


def allocations(variant: Variant) -> dict[str, tuple[int, str]]:
    """The largest sizes one pairing of ``variant`` allocates at once, each with what makes it: tokens in one split
    (an evaluation setting's test split included), tokens in one batch and, for a task scored at every position,
    attention-target entries in one split; see :data:`LIMITS`."""
    T = _context_length(variant.task_params)
    splits = [(variant.task_params[key], T, f"{key}={variant.task_params[key]} at context_length {T}")
              for key in SPLIT_SIZES if isinstance(variant.task_params.get(key), int)]
    test = variant.task_params.get("test_size")
    declared = [overrides for overrides in variant.evaluate  # the others are not applicable: no split is drawn
                if all(axis in variant.task_spec.evaluation_axes for axis in overrides)]
    for overrides in declared if isinstance(test, int) else ():
        length = _context_length({**variant.task_params, **overrides})
        setting = " ".join(f"{key}={value}" for key, value in overrides.items())
        splits.append((test, length, f"test_size={test} at evaluation {setting}"))
    found = {}
    if splits:
        n, length, why = max(splits, key=lambda s: s[0] * s[1])
        found["tokens in one split"] = (n * length, why)
        if variant.task_spec.scoring == "positions":
            n, length, why = max(splits, key=lambda s: s[0] * s[1] ** 2)
            found["attention-target entries in one split"] = (n * length ** 2, why)
    if variant.recipe.batch_size:
        found["tokens in one batch"] = (variant.recipe.batch_size * T,
                                        f"train.batch_size={variant.recipe.batch_size} at context_length {T}")
    return found


LIMITS = {"tokens in one split": MAX_SPLIT_TOKENS, "tokens in one batch": MAX_BATCH_TOKENS,
          "attention-target entries in one split": MAX_TARGET_ENTRIES}


def limit_line(pairings: Iterable[Pairing]) -> str:
    """The largest sizes a pairing of ``pairings`` allocates at once, against their limits, in one line."""
    largest: dict[str, int] = {}
    for variant in {id(p.variant): p.variant for p in pairings}.values():
        for what, (size, _) in allocations(variant).items():
            largest[what] = max(size, largest.get(what, 0))
    return "limits  " + "; ".join(f"{what} at most {limit:,} (largest here {largest[what]:,})" if what in largest
                                  else f"{what} at most {limit:,}" for what, limit in LIMITS.items())


def _check_allocations(variant: Variant) -> None:
    for what, (size, why) in allocations(variant).items():
        _check_held(f"{variant.task_spec.name} x {variant.model_spec.name}: {why}", size, LIMITS[what], what)


def scaled_warmup(default: Recipe, steps: int) -> int:
    """The warm-up of ``default`` at ``steps`` steps: the schedule keeps its shape, so the warm-up keeps its share
    of the steps (50 of 1000 -> 5 of 100), rounded, and never more than the steps."""
    if default.steps == 0:
        return min(default.warmup_steps, steps)
    return min(steps, round(default.warmup_steps * steps / default.steps))


def _block_recipe(suite: Suite, block: GridBlock, model: ModelSpec, command_line: Mapping[str, Any],
                  task: str = "") -> Recipe:
    """``model``'s recipe on ``task`` in ``block``: its default, capped by the suite's ``[budget]`` unless steps are
    given explicitly; the block's ``[grid.train]`` keys, then its tables for the task (``[grid.train.task.NAME]``),
    then for the model; ``--set`` (``command_line``); and last the block's sweep, on the axes that ``--set``
    leaves alone."""
    every = {key: value for key, value in block.train.items() if not isinstance(value, dict)}
    by_task = block.train.get(TASK_TRAIN, {})
    tables = [((), every),
              *(((TASK_TRAIN, name), table) for name, table in by_task.items() if fnmatch.fnmatchcase(task, name)),
              *(((name,), table) for name, table in block.train.items()
                if name != TASK_TRAIN and isinstance(table, dict) and fnmatch.fnmatchcase(model.name, name))]
    def explicit(key: str) -> bool:
        return key in command_line or any(key in given for _, given in tables)

    recipe = model.recipe
    if suite.max_steps is not None and recipe.steps > suite.max_steps and not explicit("steps"):
        recipe = recipe.override({"steps": suite.max_steps, "warmup_steps": scaled_warmup(model.recipe,
                                                                                          suite.max_steps)})
    for path, given in tables:
        recipe = _located_table(suite, block, path, recipe, given)
    recipe = recipe.override(command_line)
    if explicit("steps") and not explicit("warmup_steps"):
        recipe = recipe.override({"warmup_steps": scaled_warmup(model.recipe, recipe.steps)})
    if recipe.warmup_steps > recipe.steps:
        raise UsageError(f"{model.name}: warmup_steps={recipe.warmup_steps} exceeds steps={recipe.steps}: the "
                         "learning rate would never reach its peak (set train.warmup_steps to at most the steps)")
    sweep = dict(block.sweep)
    for name, table in block.model_sweeps.items():  # a model's own sweep, key by key
        if fnmatch.fnmatchcase(model.name, name):
            sweep.update(table)
    if sweep and model.trained:
        recipe = _located(suite.where("grid", block.index, "sweep"), lambda: _swept(recipe, sweep, command_line))
    return recipe


def _located_table(suite: Suite, block: GridBlock, path: tuple[str, ...], recipe: Recipe,
                   given: Mapping[str, Any]) -> Recipe:
    """``recipe`` with one ``[grid.train]`` table applied as a whole (keys may depend on each other, e.g.
    ``data = "fresh"`` with a ``batch_size``); an error names the first key that fails on its own, else the table."""
    try:
        return recipe.override(given)
    except ParamError:
        for key, value in given.items():
            _located(suite.where("grid", block.index, "train", *path, key), lambda: recipe.override({key: value}))
        return _located(suite.where("grid", block.index, "train", *path), lambda: recipe.override(given))


def _swept(recipe: Recipe, sweep: Mapping[str, tuple[float, ...]], command_line: Mapping[str, Any]) -> Recipe:
    """``recipe`` with the block's relative sweep as absolute grids: ``lr_grid`` = its lr times each factor,
    ``wd_grid`` = the listed weight decays for a recipe that uses weight decay (a non-zero ``weight_decay``, as
    the AdamW recipes have; MAD's grid), never for one without (plain Adam, or ngd, which takes none); a grid
    given on the command line is kept."""
    given: dict[str, Any] = {}
    if "lr_factors" in sweep and "lr_grid" not in command_line:
        given["lr_grid"] = [float(f"{recipe.lr * factor:.12g}") for factor in sweep["lr_factors"]]  # 0.009, not ...01
    if "weight_decay" in sweep and recipe.takes_weight_decay and recipe.weight_decay and "wd_grid" not in command_line:
        given["wd_grid"] = list(sweep["weight_decay"])
    return recipe.override(given)


Evaluations = Mapping[str, tuple[int | str, ...]]  # an evaluation axis -> the values to evaluate at


def parse_evaluations(items: Sequence[str]) -> dict[str, tuple[int | str, ...]]:
    """``--evaluate AXIS=V1,V2`` (repeatable): integers or ``xN`` multiples of the training value."""
    table: dict[str, tuple[int | str, ...]] = {}
    for item in items:
        axis, sep, values = item.partition("=")
        parts = [v for v in values.split(",") if v.strip()]
        if not sep or not axis.strip() or not parts:
            raise UsageError(f"--evaluate expects AXIS=VALUES, e.g. context_length=x2,x4, got {item!r}")
        try:
            table[axis.strip()] = table.get(axis.strip(), ()) + tuple(evaluation_value(v) for v in parts)
        except ValueError as exc:
            raise UsageError(f"--evaluate {item}: {exc}") from None
    return table


def _check_axes(table: Evaluations, specs: Iterable[TaskSpec], where: Callable[[str], str],
                known: Iterable[TaskSpec] = ()) -> None:
    """An evaluation axis that no task of the selection declares in ``evaluation_axes`` is a usage error, unless
    it is an axis of some ``known`` task (a registered one) and a task of the selection says why it takes no
    evaluation (its ``evaluation_note``): that task's evaluations are then n/a with its reason, as they are in a
    selection where another task declares the axis."""
    specs = list(specs)
    known_axes = {axis for spec in known for axis in spec.evaluation_axes}
    for axis in table:
        explained = axis in known_axes and any(spec.evaluation_note for spec in specs)
        if not explained and not any(axis in spec.evaluation_axes for spec in specs):
            declared = sorted({a for spec in specs for a in spec.evaluation_axes})
            raise ParamError(f"{where(axis)}: no task here declares {axis!r} among its evaluation axes"
                             f"{did_you_mean(axis, declared)}; declared: {', '.join(declared) or 'none'}")


def _evaluations(task: TaskSpec, task_params: Mapping[str, Any], table: Evaluations, where: Callable[[str], str],
                 checked: set[str]) -> tuple[dict[str, Any], ...]:
    """The evaluation settings of a task trained at ``task_params``, in declared order, each one override.

    A task that declares the axis is checked at each setting as at its training parameters; for one
    that does not, the setting is only recorded (its evaluation is not applicable).
    """
    settings = []
    for axis, values in table.items():
        for value in values:
            resolved = evaluation_setting(task_params, axis, value)
            if axis in task.evaluation_axes:
                params = _located(where(axis), lambda: task.resolve({**task_params, axis: resolved}))
                _located(where(axis), lambda: _check_task(task, params, checked))
            settings.append({axis: resolved})
    return tuple(settings)


def _block_names(suite: Suite, block: GridBlock, registry: Registry) -> tuple[list[str], list[str]]:
    """The registered tasks and models that ``block`` selects: by name or pattern, less its skips, and its models
    only of its ``model_origin`` where it sets one."""
    tasks = _unskipped(_select(block.tasks, registry.tasks, "task", suite.where("grid", block.index, "tasks")),
                       block.skip_tasks)
    models = _unskipped(_select(block.models, registry.models, "model", suite.where("grid", block.index, "models")),
                        block.skip_models)
    if block.model_origin is not None:  # by where a model comes from, whatever its name
        models = [name for name in models if origin(registry.models[name]) == block.model_origin]
    return tasks, models


def left_out(suite: Suite, registry: Registry, tasks: Sequence[str], models: Sequence[str]) -> list[str]:
    """The tasks and models named in ``tasks`` and ``models`` that ``suite`` does not select (a pattern narrows
    whatever the suite has); an unknown name raises the registry's one-line error."""
    selected = [_block_names(suite, block, registry) for block in suite.blocks]
    have_tasks = {name for names, _ in selected for name in names}
    have_models = {name for _, names in selected for name in names}
    return ([t for t in tasks if not is_pattern(t) and registry.task(t).name not in have_tasks]
            + [m for m in models if not is_pattern(m) and registry.model(m).name not in have_models])


def implied_suite(registry: Registry, tasks: Sequence[str], models: Sequence[str]) -> tuple[Suite, str | None]:
    """The suite of a run that names none: the default suite when it has every named task and model, else the
    widest (every task x every model at small sizes), so that any registered pairing runs by name. Returns the
    suite and, for the widest, the words that say why it was chosen."""
    default = load_suite(DEFAULT_SUITE)
    missing = left_out(default, registry, tasks, models)
    if not missing:
        return default, None
    return load_suite(WIDEST_SUITE), f"the {DEFAULT_SUITE} suite has no {', '.join(missing)}"


def expand(
    suite: Suite,
    registry: Registry,
    tasks: Sequence[str] = (),
    models: Sequence[str] = (),
    seeds: int | None = None,
    settings: Sequence[Setting] = (),
    evaluate: Evaluations | None = None,
    outputs: RunOutputs = RunOutputs(),
) -> list[Pairing]:
    """Every pairing of ``suite``, narrowed by the ``tasks``/``models`` filters (names or glob patterns), in suite
    order.

    ``seeds`` replaces every block's seeds with ``0..seeds-1``; ``evaluate`` (from ``--evaluate``)
    replaces every block's ``[grid.evaluate]``; ``outputs`` says what every pairing writes besides its record
    (:mod:`tokbench.outputs`). Pairings that train alike (from overlapping blocks) appear once, evaluated at every
    setting any of their blocks asks for, in the order first asked (:func:`_merged`). Each distinct task instance
    is created once here, so that a constraint between its parameters (its
    ``validate()``) is a usage error before anything runs.
    """
    task_filter = _filter(tasks, registry.tasks, "task")
    model_filter = _filter(models, registry.models, "model")
    planned: dict[tuple[str, int], None] = {}  # what trains (see _merged) and the seed, in suite order
    variants: dict[str, Variant] = {}
    checked: set[str] = set()
    laws: dict[str, bool] = {}  # whether a task at these parameters gives the law of its labels
    for block in suite.blocks:
        task_names, model_names = _block_names(suite, block, registry)
        task_specs = {n: registry.tasks[n] for n in task_names}
        model_specs = {n: registry.models[n] for n in model_names}
        task_given = _block_params(suite, block, "task", task_specs, registry.tasks)
        model_given = _block_params(suite, block, "model", model_specs, registry.models)
        block_seeds = range(seeds) if seeds is not None else block.seeds
        ladders = _block_ladders(suite, block, task_specs, registry.tasks, task_given)
        _check_train_tables(suite, block, model_specs, registry.models, list(task_specs))
        table, where = evaluate, (lambda axis: f"--evaluate {axis}")
        if evaluate is None:
            table, where = block.evaluate, (lambda axis, b=block.index: suite.where("grid", b, "evaluate", axis))
            _check_axes(table, task_specs.values(), where, registry.tasks.values())
        for task in (t for t in task_specs.values() if not task_filter or t.name in task_filter):
            for model in (m for m in model_specs.values() if not model_filter or m.name in model_filter):
                set_task, set_model, set_train = _route(settings, task, model)
                model_params = model.resolve(model_given[model.name] | set_model)
                recipe = _block_recipe(suite, block, model, set_train, task.name)
                _check_held(f"{model.name}: train.steps", recipe.steps, MAX_STEPS, "optimiser steps")
                for rung, rung_params in ladders.get(task.name, [(None, {})]):
                    if len(planned) + len(block_seeds) > MAX_PAIRINGS:
                        raise UsageError(f"{suite.origin} expands to more than {MAX_PAIRINGS:,} pairings; narrow "
                                         "it with --task, --model or --seeds, or split it into several suites")
                    task_params = task.resolve(task_given[task.name] | rung_params | set_task)
                    _check_task(task, task_params, checked)
                    if rung is not None:  # the values the pairing trains with (--set may override a rung's)
                        rung = Rung(rung.index, rung.count, {key: task_params[key] for key in rung.axes})
                    evaluations = _evaluations(task, task_params, table, where, checked)
                    variant = Variant(task, model, task_params, model_params, recipe, rung, evaluations, outputs)
                    _check_allocations(variant)
                    if recipe.validate_by == "expected":
                        _check_label_law(task, task_params, laws)
                    key = _merged(variant, variants)
                    planned.update(dict.fromkeys((key, seed) for seed in block_seeds))
    grid = [Pairing(variants[key], seed) for key, seed in planned]
    if not grid:
        narrowed = " ".join([*(f"--task {t}" for t in tasks), *(f"--model {m}" for m in models)])
        wider = f" (--suite {WIDEST_SUITE} has every task x every model)" if narrowed else ""
        raise UsageError(f"no pairing of {suite.origin} matches {narrowed or 'the registered plugins'}{wider}")
    _check_settings_used(settings, grid)
    if evaluate:
        _check_axes(evaluate, {p.task_spec.name: p.task_spec for p in grid}.values(), lambda axis: f"--evaluate {axis}")
    return grid


def _merged(variant: Variant, variants: dict[str, Variant]) -> str:
    """The key of what ``variant`` trains (its identity less its evaluations, which do not touch training), with
    ``variants[key]`` the variant to plan for it. A variant that trains like an earlier one (another block planning
    the same pairing, e.g. a baseline in two rankings, one with a length table) is that one, evaluated also at the
    settings it adds: one training, one record."""
    key = replace(variant, evaluate=()).hashes(0) if variant.evaluate else variant.hashes(0)
    known = variants.setdefault(key, variant)
    added = tuple(setting for setting in variant.evaluate if setting not in known.evaluate)
    if added:
        variants[key] = replace(known, evaluate=known.evaluate + added)
    return key


def _check_label_law(task: TaskSpec, params: dict[str, Any], checked: dict[str, bool]) -> None:
    """``train.validate_by = expected`` reads the law of the labels (the task's ``bayes_log_probs``): a task that
    gives none is a usage error at planning, not a failed record per pairing. Asked once per distinct parameters,
    of one drawn sequence."""
    import torch

    key = canonical_json([task.name, params])
    if key not in checked:
        try:
            instance = task.create(params)
            tokens = instance.generate(1, torch.Generator().manual_seed(0)).tokens
            checked[key] = instance.bayes_log_probs(tokens) is not None
        except Exception:  # noqa: BLE001 - not a usage error: the pairing's record will carry it
            checked[key] = True
    if not checked[key]:
        raise ParamError(f"train.validate_by=expected needs the law of the labels, and {task.name} gives no Bayes "
                         "probabilities (bayes_log_probs); use validate_by=labels")


def _check_task(task: TaskSpec, params: dict[str, Any], checked: set[str]) -> None:
    """Create the task once per distinct parameters; a constraint it reports (``UsageError``) stops the plan.

    Other failures (say its module does not import) are left to the run, which records them per pairing.
    """
    key = canonical_json([task.name, params])
    if key in checked:
        return
    checked.add(key)
    try:
        task.create(params)
    except UsageError as exc:
        shown = " ".join(f"{k}={v}" for k, v in params.items())
        raise ParamError(f"task {task.name!r} with {shown}: {exc}") from None
    except Exception:  # noqa: BLE001 - not a usage error: the pairing's record will carry it
        pass


def parse_shard(text: str) -> tuple[int, int]:
    """``"i/n"`` with ``0 <= i < n``, as in a SLURM array ``--shard $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT``."""
    index, slash, count = text.partition("/")
    try:
        i, n = int(index), int(count)
    except ValueError:
        i, n = -1, 0
    if not slash or n < 1 or not 0 <= i < n:
        raise UsageError(f"--shard expects i/n with 0 <= i < n (e.g. 0/4 .. 3/4), got {text!r}")
    return i, n


def on_rungs(pairings: Sequence[Pairing], rungs: Sequence[int]) -> list[Pairing]:
    """The pairings on these rungs of their ladders (0 the easiest), and every pairing of a task without a ladder:
    a plan cut in breadth (one rung per family), each record still placed on its ladder. A rung that no ladder of
    the plan has is a usage error naming the ladders' lengths."""
    lengths = sorted({p.variant.rung.count for p in pairings if p.variant.rung is not None})
    absent = [rung for rung in rungs if not any(rung < length for length in lengths)]
    if absent:
        have = f"its ladders have {' or '.join(map(str, lengths))} rungs" if lengths else "it has no ladder"
        raise UsageError(f"--rung {', '.join(map(str, absent))}: no ladder of this plan has that rung ({have}, "
                         "counted from 0)")
    return [p for p in pairings if p.variant.rung is None or p.variant.rung.index in rungs]


def shard(pairings: Sequence[Pairing], index: int, count: int) -> list[Pairing]:
    """A deterministic 1/count of the grid: round robin over its cells (a pairing without its seed) sorted by
    their hash, so that every seed of a cell lands in the same shard.

    The assignment depends only on the set of pairings, never on the order of the
    suite's blocks, and every pairing belongs to exactly one shard. Keeping a cell whole
    is what lets adaptive seeding (``--target-ci``) decide in a shard exactly as in one run.
    """
    cells = sorted({p.cell for p in pairings})
    keep = set(cells[index::count])
    return [p for p in pairings if p.cell in keep]
