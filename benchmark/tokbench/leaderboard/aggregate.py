"""Group run records into leaderboard cells and summarise each cell across seeds.

A column is one task configuration: (task, task version, resolved task
parameters, eval split). A row is one model configuration: (model, model
version, resolved model parameters, resolved training recipe). A cell holds the
records of one (column, row) pair, one per seed, so different versions or
parameter sets never share a cell. Failed records stay in their cell and are
counted; they never enter a mean.
"""
from __future__ import annotations

import json
import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokbench.errors import UsageError
from tokbench.leaderboard.stats import (ABOVE, CONFIDENCE, MARGIN, MATCHES, MIN_SEEDS, Stat, binomial_var, compare,
                                        metric_range, summarise)

# Metrics of every successful run; any other metric is a diagnostic, present only where it applies.
CORE_METRICS = ("accuracy", "train_accuracy", "val_accuracy", "test_accuracy", "bayes_accuracy", "normalized_accuracy",
                "chance_accuracy", "oracle_accuracy")
DIGITS = 3  # decimals shown for accuracies
# Models that read the task's answer instead of learning it: marked, never bold, never in a claim. A record says so
# itself (meta.model_oracle, from ModelSpec.oracle); records name a model's family too (``meta.model_family``:
# ``oracle`` marks one, ``baseline`` a reference that learns nothing). The name set serves older records.
ORACLES = frozenset({"bayes-optimal"})
ORACLE_FAMILY, BASELINE_FAMILY = "oracle", "baseline"
# The single attention layers of the theory papers (positional encodings, initialisations, [A]'s and [B]'s layers)
# declare this family (ModelSpec.family): a score table ranks them apart from the architectures.
SINGLE_LAYER_FAMILY = "attention (1 layer)"
# The built-in baselines (a task may add its own, family ``baseline``): a learned score must be told apart from every
# baseline of its column before it is bold (:func:`bold_rule`), and last-token decides which families count.
LAST_TOKEN, UNIFORM = "last-token", "uniform"


def canonical(value: Any) -> str:
    """Canonical JSON text of ``value``: the identity key of parameter sets."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def format_value(value: Any) -> str:
    """A parameter value as it appears in labels: ``0.8``, ``float32``, ``0.01/0.1``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        short = f"{value:g}"
        return short if float(short) == value else repr(value)
    if isinstance(value, (list, tuple)):
        return "/".join(format_value(v) for v in value) or "none"
    return "none" if value is None else str(value)


def format_count(n: int) -> str:
    """``960``, ``12.3k``, ``1.25M``, ``2G``: a count to three significant digits, short enough for a table cell."""
    if n < 1000:
        return str(n)
    rounded = float(f"{n:.3g}")  # the suffix follows the rounded value: 999,999 is 1M, not 1e+03k
    for factor, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if rounded >= factor:
            return f"{rounded / factor:.3g}{suffix}"
    return str(n)


def count_range(counts: list[int]) -> str:
    """``960`` or ``960-12.3k`` (smallest to largest); empty without counts."""
    if not counts:
        return ""
    low, high = format_count(min(counts)), format_count(max(counts))
    return low if low == high else f"{low}-{high}"


def format_params(params: dict[str, Any]) -> str:
    """``K=6, p=0.5`` in key order."""
    return ", ".join(f"{key}={format_value(params[key])}" for key in sorted(params))


@dataclass
class Column:
    """One task configuration."""

    key: str
    task: str
    version: str
    params: dict[str, Any]
    eval_split: str
    description: str = ""
    citation: str = ""
    label: str = ""
    slug: str = ""
    defaults: dict[str, Any] = field(default_factory=dict)  # the spec's, when the records carry them
    protocol: dict[str, Any] = field(default_factory=dict)  # its records' CELL_RECIPE_KEYS, where set
    bayes: Stat | None = None
    bayes_by_seed: dict[int, float] = field(default_factory=dict)

    @property
    def on_training_split(self) -> bool:
        """Scored on the data it trains on: it measures what training finds, so it gets its own table."""
        return self.eval_split == "train"

    def examples(self, split: str) -> int | None:
        """Sequences in ``split`` when the task declares its size (``test_size`` ...), else None."""
        size = self.params.get(f"{split}_size")
        return size if isinstance(size, int) and size > 0 else None


@dataclass
class Row:
    """One model configuration: the model's parameters and its training recipe."""

    key: str
    model: str
    version: str
    params: dict[str, Any]
    train: dict[str, Any]
    description: str = ""
    citation: str = ""
    recipe: str = ""
    label: str = ""
    slug: str = ""
    defaults: dict[str, Any] = field(default_factory=dict)  # the spec's parameters and recipe, when recorded
    family: str = ""  # the model family its records name (older records: none)
    declared_oracle: bool | None = None  # the record's meta.model_oracle (ModelSpec.oracle); None: older records
    trained: bool = False  # whether its recipe takes gradient steps (baselines take none)

    @property
    def oracle(self) -> bool:
        if self.declared_oracle is not None:
            return self.declared_oracle
        return self.model in ORACLES or self.family == ORACLE_FAMILY

    @property
    def baseline(self) -> bool:
        return self.family == BASELINE_FAMILY or self.model in (LAST_TOKEN, UNIFORM)

    @property
    def pinned(self) -> bool:
        """A reference row (oracle or baseline): kept apart from the ranked rows, never bold, never ranked."""
        return self.oracle or self.baseline


@dataclass
class Cell:
    """The records of one (column, row) pair and their statistics across seeds."""

    column: Column
    row: Row
    ok: list[dict[str, Any]] = field(default_factory=list)
    failed: list[dict[str, Any]] = field(default_factory=list)
    not_applicable: list[dict[str, Any]] = field(default_factory=list)
    metrics: dict[str, Stat] = field(default_factory=dict)
    untrained: Stat | None = None  # training accuracy at step 0, the model before any update
    steps: Stat | None = None
    final_loss: Stat | None = None
    wall_seconds: Stat | None = None
    best: bool = False

    @property
    def seeds(self) -> list[int]:
        return [r["seed"] for r in self.ok]

    @property
    def accuracy(self) -> Stat | None:
        return self.metrics.get("accuracy")

    @property
    def adaptive(self) -> dict[str, Any] | None:
        """Why ``tokbench run --target-ci`` stopped adding seeds to this cell, as its records say."""
        notes = [r["adaptive"] for r in self.ok + self.failed if r.get("adaptive")]
        return notes[-1] if notes else None

    @property
    def solved(self) -> tuple[int, int] | None:
        """How many of the seeds trained towards a target stopped there (solved their task), and of how many;
        None when no seed had a target."""
        aimed = [r for r in self.ok if (r.get("train") or {}).get("target") and (r.get("train") or {}).get("steps")]
        if not aimed:
            return None
        return sum(r["train"].get("stopped_because") == "target" for r in aimed), len(aimed)

    def values(self, metric: str) -> list[float]:
        """The per-seed values of ``metric`` (seeds where it is null are left out)."""
        return [r["metrics"][metric] for r in self.ok if r["metrics"].get(metric) is not None]

    def untrained_values(self) -> list[float] | None:
        """Per seed, the training accuracy at step 0 (the model before any update); None unless every seed has it."""
        starts = [((r.get("curve") or {}).get("accuracy") or [None])[0] for r in self.ok]
        return starts if starts and None not in starts else None

    def eval_floor(self, metric: str) -> float | None:
        """The variance of one seed's ``metric`` from its finite evaluation set alone: the floor of its interval.

        An accuracy on m sequences is a binomial proportion (an upper bound for per-position
        scoring); ``excess_loss`` brings its own standard error. A split's accuracy on a split
        whose size the task does not declare has a floor nobody can compute: None, so that
        the cell shows no interval and no claim is made from it. Any other metric has no known
        evaluation error: 0 (its interval is the seeds' alone).
        """
        if metric == "excess_loss":
            errors = [r["metrics"].get("excess_loss_se") for r in self.ok]
            return math.fsum(e * e for e in errors) / len(errors) if None not in errors else 0.0
        split = self.column.eval_split if metric == "accuracy" else metric.removesuffix("_accuracy")
        if metric != "accuracy" and metric not in SPLIT_ACCURACIES:
            return 0.0
        values = self.values(metric)
        if not values:
            return 0.0
        return _binomial_floor(values, self.column.examples(split))

    def eval_var(self, metric: str) -> float:
        """:meth:`eval_floor`, 0 where it is unknown (what ``tokbench run --target-ci`` predicts seeds with)."""
        floor = self.eval_floor(metric)
        return 0.0 if floor is None else floor

    def untrained_examples(self) -> int | None:
        """The sequences each seed's step-0 training accuracy was measured on: one training batch, i.e. the recipe's
        ``batch_size`` new sequences (``data = "fresh"``) or of the training split, and the whole training split for
        a full-batch recipe (``batch_size`` 0, or at least the split); None where that count is unknown."""
        batch = self.row.train.get("batch_size") or 0
        train = self.column.examples("train")
        if batch and (self.row.train.get("data") == "fresh" or (train is not None and batch < train)):
            return batch
        return train

    def untrained_floor(self) -> float | None:
        """The evaluation floor of the step-0 value (:meth:`untrained_examples` sequences); None where unknown."""
        starts = self.untrained_values()
        return _binomial_floor(starts, self.untrained_examples()) if starts else 0.0

    @property
    def sizes(self) -> tuple[list[int], list[int]]:
        """The parameter counts and the state sizes its records state (each sorted, repeats once; older
        records and models without a fixed-size state add none)."""
        sizes = [r.get("size") or {} for r in self.ok]
        return (sorted({s["parameters"] for s in sizes if s.get("parameters") is not None}),
                sorted({s["state"] for s in sizes if s.get("state") is not None}))

    @property
    def chosen_lrs(self) -> list[float]:
        """Learning rates picked on the validation split (empty without an lr grid)."""
        return sorted({r["train"]["lr"] for r in self.ok if r["train"].get("lr_grid")})

    @property
    def chosen_weight_decays(self) -> list[float]:
        """Weight decays picked on the validation split with the learning rate (empty without a weight-decay grid)."""
        return sorted({r["train"]["weight_decay"] for r in self.ok if r["train"].get("wd_grid")})


# The accuracies whose evaluation set is a split of the task (``accuracy`` is the eval split's).
SPLIT_ACCURACIES = ("train_accuracy", "val_accuracy", "test_accuracy")


def _binomial_floor(values: list[float], examples: int | None) -> float | None:
    """The binomial variance of one of ``values`` (proportions on ``examples`` sequences each); None if unknown."""
    if examples is None:
        return None
    return binomial_var(math.fsum(values) / len(values), examples, len(values))


@dataclass
class Leaderboard:
    """Columns, rows and cells, in a fixed order (by name, then label)."""

    columns: list[Column]
    rows: list[Row]
    cells: dict[tuple[str, str], Cell]

    def cell(self, column: Column, row: Row) -> Cell | None:
        return self.cells.get((column.key, row.key))

    def column_cells(self, column: Column) -> list[Cell]:
        return [c for row in self.rows if (c := self.cell(column, row)) is not None]

    def diagnostics(self, column: Column) -> list[str]:
        """Names of the diagnostics measured on ``column``."""
        names = {m for cell in self.column_cells(column) for m in cell.metrics}
        return sorted(names - set(CORE_METRICS))

    def failed(self) -> list[tuple[Cell, dict[str, Any]]]:
        return [(cell, rec) for cell in self.cells.values() for rec in cell.failed]

    def record_count(self) -> int:
        return sum(len(c.ok) + len(c.failed) + len(c.not_applicable) for c in self.cells.values())

    @property
    def test_columns(self) -> list[Column]:
        """Columns scored on held-out data: the accuracy table, the heatmap and the Bayes claims."""
        return [c for c in self.columns if not c.on_training_split]

    @property
    def training_columns(self) -> list[Column]:
        return [c for c in self.columns if c.on_training_split]


#: recipe keys that say how a task's cells are measured rather than how a model trains: the validation its stop
#: reads and the stop rule itself. A suite sets them per task for every model of a cell, so they belong to the
#: column (the task configuration), and a family validated or stopped its own way keeps its models in the rows of
#: the others
CELL_RECIPE_KEYS = ("validate_by", "target", "patience", "min_delta")

#: recipe keys of a run's step budget: its cap, the schedule's warm-up sized to it and the budgets it is scored at.
#: A suite may set them per task (the tokbench suite's caps by family), so they do not split a model's row; a row
#: keeps them in its key only where one column holds that model under two budgets, which one cell must not mix
BUDGET_KEYS = ("steps", "warmup_steps", "budgets")


def _configuration(rec: dict[str, Any]) -> list[Any]:
    return [rec["task"], rec["task_version"], rec["params"]["task"], rec["eval_split"]]


def takes_steps(train: dict[str, Any]) -> bool:
    """Whether a recipe takes gradient steps: baselines and oracles take none."""
    return bool(train.get("steps"))


def _trains(rec: dict[str, Any]) -> bool:
    return takes_steps(rec["params"]["train"])


def _own_protocol(rec: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in rec["params"]["train"].items() if key in CELL_RECIPE_KEYS}


def _shared_protocols(records: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The cell protocol the trained records agree on, per task configuration and per task.

    An untrained record (a baseline, an oracle) has no protocol of its own but was scored on the same test
    sequences, so it joins the column of its configuration's trained records; a configuration only baselines ran
    (a rung a plan cut in breadth left out) takes the protocol of the task's trained records. Where those disagree
    (sections merged from suites that validate differently), it keeps a column of its own.
    """
    found: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for rec in records:
        if _trains(rec):
            protocol = _own_protocol(rec)
            for key in _protocol_keys(rec):
                found[key][canonical(protocol)] = protocol
    return {key: next(iter(protocols.values())) for key, protocols in found.items() if len(protocols) == 1}


def _protocol_keys(rec: dict[str, Any]) -> tuple[str, str]:
    """The record's task configuration, then its task: where an untrained record looks for its protocol."""
    return canonical(_configuration(rec)), canonical([rec["task"], rec["task_version"], rec["eval_split"]])


def _cell_protocol(rec: dict[str, Any], shared: dict[str, dict[str, Any]]) -> dict[str, Any]:
    if _trains(rec):
        return _own_protocol(rec)
    return next((shared[key] for key in _protocol_keys(rec) if key in shared), {})


def _model_recipe(rec: dict[str, Any], budget: bool = True) -> dict[str, Any]:
    """The record's recipe but for the column's keys; without its step budget where ``budget`` is false."""
    return {key: value for key, value in rec["params"]["train"].items()
            if key not in CELL_RECIPE_KEYS and (budget or key not in BUDGET_KEYS)}


def _column_key(rec: dict[str, Any], protocol: dict[str, Any]) -> str:
    # an empty protocol is absent from the key, so older records' keys stay as they were
    return canonical([*_configuration(rec), *([protocol] if protocol else [])])


def _row_key(rec: dict[str, Any], budget: bool = True) -> str:
    return canonical([rec["model"], rec["model_version"], rec["params"]["model"], _model_recipe(rec, budget)])


def _budget_apart(records: Iterable[dict[str, Any]], column_keys: list[str]) -> set[str]:
    """The rows (keyed without their step budget) that some column holds under more than one budget: those keep
    the budget in their key."""
    budgets: dict[tuple[str, str], set[str]] = defaultdict(set)
    for rec, column in zip(records, column_keys):
        train = rec["params"]["train"]
        budgets[column, _row_key(rec, budget=False)].add(canonical({key: train.get(key) for key in BUDGET_KEYS}))
    return {row for (_, row), found in budgets.items() if len(found) > 1}


def build(records: Iterable[dict[str, Any]]) -> Leaderboard:
    """Aggregate validated run records (schema v1, one per pairing and seed) into a :class:`Leaderboard`."""
    columns: dict[str, Column] = {}
    rows: dict[str, Row] = {}
    cells: dict[tuple[str, str], Cell] = {}
    records = sorted(records, key=lambda r: (r["task"], r["model"], r["seed"], r["config_hash"]))
    shared = _shared_protocols(records)
    protocols = [_cell_protocol(rec, shared) for rec in records]
    column_keys = [_column_key(rec, protocol) for rec, protocol in zip(records, protocols)]
    apart = _budget_apart(records, column_keys)
    recipes: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)  # each row's recipes, budget included
    described: dict[str, dict[str, set[str]]] = defaultdict(dict)  # each row's recipe texts, with their tasks
    for rec, protocol, key in zip(records, protocols, column_keys):
        meta = rec.get("meta") or {}
        defaults = meta.get("defaults") or {}
        column = columns.setdefault(key, Column(
            key, rec["task"], rec["task_version"], rec["params"]["task"], rec["eval_split"],
            meta.get("task_description", ""), meta.get("task_citation", ""), defaults=defaults.get("task") or {},
            protocol=protocol))
        row_defaults = {**(defaults.get("model") or {}),
                        **{f"train.{k}": v for k, v in (defaults.get("train") or {}).items()}}
        budget = _row_key(rec, budget=False) in apart
        row_key = _row_key(rec, budget)
        recipe = _model_recipe(rec)
        recipes[row_key][canonical(recipe)] = recipe
        if meta.get("recipe"):
            described[row_key].setdefault(meta["recipe"], set()).add(rec["task"])
        row = rows.setdefault(row_key, Row(
            row_key, rec["model"], rec["model_version"], rec["params"]["model"], _model_recipe(rec, budget),
            meta.get("model_description", ""), meta.get("model_citation", ""), meta.get("recipe", ""),
            defaults=row_defaults, family=meta.get("model_family") or "",
            declared_oracle=meta.get("model_oracle"), trained=_trains(rec)))
        cell = cells.setdefault((column.key, row.key), Cell(column, row))
        {"ok": cell.ok, "not_applicable": cell.not_applicable}.get(rec["status"], cell.failed).append(rec)
    if not cells:
        raise UsageError("no run records to aggregate; run `tokbench run` first or pass --records DIR")
    for row in rows.values():  # a row trained under one budget states it, as its records do
        if len(recipes[row.key]) == 1:
            (row.train,) = recipes[row.key].values()
        if len(described[row.key]) > 1:  # a cap or a stop rule set per task: each text with the tasks it ran
            row.recipe = "; ".join(f"{text} ({', '.join(sorted(tasks))})" for text, tasks in described[row.key].items())

    weight: Counter[str] = Counter()
    for (col_key, row_key), cell in cells.items():
        count = len(cell.ok) + len(cell.failed) + len(cell.not_applicable)
        weight[col_key] += count
        weight[row_key] += count
    _name_columns(list(columns.values()), weight)
    _name_rows(list(rows.values()), weight)
    for cell in cells.values():
        _summarise_cell(cell)
    board = Leaderboard(sorted(columns.values(), key=lambda c: (c.task, c.label)),
                        sorted(rows.values(), key=lambda r: (r.model, r.label)), cells)
    for column in board.columns:
        column.bayes_by_seed = _bayes(board.column_cells(column))
        if column.bayes_by_seed:
            column.bayes = summarise([column.bayes_by_seed[s] for s in sorted(column.bayes_by_seed)],
                                     bounds=metric_range("bayes_accuracy"))
        _mark_best(board.column_cells(column))
    return board


def _summarise_cell(cell: Cell) -> None:
    if not cell.ok:
        return
    names = sorted({name for r in cell.ok for name, value in r["metrics"].items() if value is not None})
    for name in names:
        # A diagnostic is absent where it does not apply (null where it was not finite); it is averaged
        # over the runs that have it.
        cell.metrics[name] = summarise(cell.values(name), cell.eval_floor(name), metric_range(name))
    starts = cell.untrained_values()
    cell.untrained = summarise(starts, cell.untrained_floor(), metric_range("accuracy")) if starts else None
    for name in ("steps", "final_loss", "wall_seconds"):
        values = [r["train"][name] for r in cell.ok if _finite(r["train"].get(name))]
        setattr(cell, name, summarise(values, bounds=metric_range(name)) if values else None)


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def _bayes(cells: list[Cell]) -> dict[int, float]:
    """The column's Bayes-optimal accuracy by seed (the data depend on the seed, not the model)."""
    per_seed: dict[int, float] = {}
    for cell in cells:
        for rec in cell.ok:
            if rec["metrics"].get("bayes_accuracy") is not None:
                per_seed.setdefault(rec["seed"], rec["metrics"]["bayes_accuracy"])
    return per_seed


# What bold is tested against on a column (:func:`column_floor`): the baselines run on it, else the chance accuracy
# every seed records, else nothing (no floor: nothing is bold).
FLOOR_BASELINES, FLOOR_CHANCE, NO_FLOOR = "baselines", "chance", ""


def bold_rule() -> str:
    """The one rule of bold, in the words every caption, method text and docs/scores.md use, from the constants the
    code applies (:func:`_mark_best` here, :func:`scores._mark_best` for the score tables)."""
    return (f"Bold: in each column, the highest mean of a learned model and every learned model's mean shown "
            f"equivalent to it within ±{MARGIN:g} (TOST at {1 - CONFIDENCE:.0%}, at least {MIN_SEEDS} seeds), "
            f"where also shown above every baseline run on the column (the {CONFIDENCE:.0%} interval of the "
            f"difference above 0) or, without a baseline, above the chance accuracy its seeds record (a score of 0); "
            f"a column with neither has no floor and nothing bold.")


def floors(cells: list[Cell]) -> list[Cell]:
    """The baselines of a column with an accuracy: what a bold cell must be shown above."""
    return [c for c in cells if c.row.baseline and not c.row.oracle and c.accuracy is not None]


def column_floor(cells: list[Cell]) -> str:
    """What bold is tested against on the column of ``cells`` (see :func:`bold_rule`)."""
    if floors(cells):
        return FLOOR_BASELINES
    scored = [c for c in cells if c.accuracy is not None and not c.row.pinned]
    if scored and all(len(c.values("chance_accuracy")) == len(c.ok) for c in scored):
        return FLOOR_CHANCE
    return NO_FLOOR


def _mark_best(cells: list[Cell]) -> None:
    """Bold, by :func:`bold_rule`: the highest mean among learned models, and every mean shown equivalent to it,
    provided the cell is shown above every baseline of its column, or, without one, above its seeds' own chance
    accuracy; a column with neither has nothing bold.

    Equivalent: on the same seeds, the per-seed difference is within +-``MARGIN`` by
    :func:`stats.compare` (at least 3 seeds); above a baseline: the 95% interval of the
    per-seed difference from it lies above 0 (a baseline not run on the column asks
    nothing); above chance: the same test against the per-seed ``chance_accuracy`` (a
    constant of the seed's test sequences, so only the cell's evaluation variance).
    Oracles and baselines are never best.
    """
    scored = [c for c in cells if c.accuracy is not None and not c.row.pinned]
    floor = column_floor(cells)
    if not scored or floor == NO_FLOOR:
        return
    references = floors(cells)
    top = max(scored, key=lambda c: c.accuracy.mean)
    for cell in scored:
        best = cell.accuracy.mean == top.accuracy.mean or (cell.seeds == top.seeds and _paired(cell, top) == MATCHES)
        if floor == FLOOR_BASELINES:
            cell.best = best and all(_paired(cell, ref) == ABOVE for ref in references)
        else:
            cell.best = best and compare(cell.values("accuracy"), cell.values("chance_accuracy"),
                                         cell.eval_floor("accuracy")).verdict == ABOVE


def _paired(cell: Cell, other: Cell) -> str | None:
    """The verdict of ``cell``'s accuracy against ``other``'s on the seeds both have (None: no claim)."""
    shared = sorted(set(cell.seeds) & set(other.seeds))
    if not shared:
        return None
    mine = dict(zip(cell.seeds, cell.values("accuracy")))
    theirs = dict(zip(other.seeds, other.values("accuracy")))
    return compare([mine[s] for s in shared], [theirs[s] for s in shared],
                   add_floors(cell.eval_floor("accuracy"), other.eval_floor("accuracy"))).verdict


def add_floors(*terms: float | None) -> float | None:
    """The evaluation variance of a difference (the sum of its terms'); None where any is unknown."""
    return None if None in terms else math.fsum(terms)


def _name_columns(columns: list[Column], weight: Counter[str]) -> None:
    flats = [{"version": c.version, "split": c.eval_split, **c.params,
              **{f"train.{key}": value for key, value in c.protocol.items()}} for c in columns]
    labels = _labels([c.task for c in columns], flats, [weight[c.key] for c in columns], [c.defaults for c in columns])
    for column, label in zip(columns, labels):
        column.label = label
    _slugs(columns)


def _name_rows(rows: list[Row], weight: Counter[str]) -> None:
    flats = [{"version": r.version, **r.params, **{f"train.{k}": v for k, v in r.train.items()}} for r in rows]
    labels = _labels([r.model for r in rows], flats, [weight[r.key] for r in rows], [r.defaults for r in rows])
    for row, label in zip(rows, labels):
        row.label = label
    _slugs(rows)


def _labels(names: list[str], flats: list[dict[str, Any]], weights: list[int],
            defaults: list[dict[str, Any]]) -> list[str]:
    """Name each configuration after its plugin name plus the parameters that set it apart.

    Among configurations of the same name, each parameter whose value differs has a
    base value: the spec's default, which the records carry in ``meta.defaults``
    (older records do not: then the value carried by the most records). A label lists
    only the parameters that differ from their base, e.g. ``attn-paper-a dtype=float32``;
    two configurations never get the same label.
    """
    labels = list(names)
    groups: dict[str, list[int]] = defaultdict(list)
    for i, name in enumerate(names):
        groups[name].append(i)
    for members in groups.values():
        if len(members) < 2:
            continue
        for key in sorted({k for i in members for k in flats[i]}):
            values = {i: canonical(flats[i].get(key)) for i in members}
            if len(set(values.values())) == 1:
                continue
            stated = {canonical(defaults[i][key]) for i in members if key in defaults[i]}
            if len(stated) == 1 and all(key in defaults[i] for i in members):
                base = stated.pop()
            else:
                counts: Counter[str] = Counter()
                for i in members:
                    counts[values[i]] += weights[i]
                base = min(counts, key=lambda v: (-counts[v], v))
            for i in members:
                if values[i] != base:
                    labels[i] += f" {key}={format_value(flats[i].get(key))}"
    return labels


def slugify(label: str) -> str:
    """A file-name-safe form of ``label``: lower case, runs of other characters as one ``-``."""
    return re.sub(r"[^a-z0-9.]+", "-", label.lower()).strip("-.")


def _slugs(items: list[Column] | list[Row]) -> None:
    """File-name-safe, unique identifiers derived from the labels."""
    seen: set[str] = set()
    for item in sorted(items, key=lambda x: x.label):
        base = slugify(item.label) or "x"
        slug, n = base, 1
        while slug in seen:
            n += 1
            slug = f"{base}-{n}"
        seen.add(slug)
        item.slug = slug


@dataclass
class Section:
    """One leaderboard among several in a document, e.g. one per suite; ``name`` is "" when it is the only one."""

    name: str
    board: Leaderboard
    records: list[dict[str, Any]]
    sources: list[Path]

    @classmethod
    def of(cls, records: list[dict[str, Any]], name: str = "", sources: Sequence[Path] = ()) -> Section:
        """Aggregate ``records`` into a section, e.g. ``show([Section.of(records)])`` after a run."""
        return cls(name, build(records), records, list(sources))

    @property
    def slug(self) -> str:
        return slugify(self.name)
