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
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokbench.errors import UsageError

CONFIDENCE = 0.95
INTERVAL = "95% Student's t confidence interval across seeds (scipy.stats.t, n-1 degrees of freedom)"
# Metrics of every successful run; any other metric is a diagnostic, present only where it applies.
CORE_METRICS = ("accuracy", "train_accuracy", "val_accuracy", "test_accuracy", "bayes_accuracy", "normalized_accuracy")
DIGITS = 3  # decimals shown for accuracies; "best" ties are judged at this precision


@dataclass(frozen=True)
class Stat:
    """A mean over seeds and the half-width of its confidence interval (``None`` with one seed)."""

    mean: float
    half_width: float | None
    n: int

    @property
    def low(self) -> float:
        return self.mean - (self.half_width or 0.0)

    @property
    def high(self) -> float:
        return self.mean + (self.half_width or 0.0)


def summarise(values: Sequence[float]) -> Stat:
    """Mean and Student's t interval of ``values`` (one per seed).

    ``statistics`` computes in exact rational arithmetic, so the result does not depend on
    the order of the seeds and equal values give a half-width of exactly 0.
    """
    from scipy import stats

    n = len(values)
    mean = statistics.mean(values)
    if n < 2:
        return Stat(mean, None, n)
    t = float(stats.t.ppf((1 + CONFIDENCE) / 2, n - 1))
    return Stat(mean, t * statistics.stdev(values) / math.sqrt(n), n)


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
    bayes: Stat | None = None


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


@dataclass
class Cell:
    """The records of one (column, row) pair and their statistics across seeds."""

    column: Column
    row: Row
    ok: list[dict[str, Any]] = field(default_factory=list)
    failed: list[dict[str, Any]] = field(default_factory=list)
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
    def chosen_lrs(self) -> list[float]:
        """Learning rates picked on the validation split (empty without an lr grid)."""
        return sorted({r["train"]["lr"] for r in self.ok if r["train"].get("lr_grid")})


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
        return sum(len(c.ok) + len(c.failed) for c in self.cells.values())


def _column_key(rec: dict[str, Any]) -> str:
    return canonical([rec["task"], rec["task_version"], rec["params"]["task"], rec["eval_split"]])


def _row_key(rec: dict[str, Any]) -> str:
    return canonical([rec["model"], rec["model_version"], rec["params"]["model"], rec["params"]["train"]])


def build(records: Iterable[dict[str, Any]]) -> Leaderboard:
    """Aggregate validated run records (schema v1, one per pairing and seed) into a :class:`Leaderboard`."""
    columns: dict[str, Column] = {}
    rows: dict[str, Row] = {}
    cells: dict[tuple[str, str], Cell] = {}
    for rec in sorted(records, key=lambda r: (r["task"], r["model"], r["seed"], r["config_hash"])):
        meta = rec.get("meta") or {}
        column = columns.setdefault(_column_key(rec), Column(
            _column_key(rec), rec["task"], rec["task_version"], rec["params"]["task"], rec["eval_split"],
            meta.get("task_description", ""), meta.get("task_citation", "")))
        row = rows.setdefault(_row_key(rec), Row(
            _row_key(rec), rec["model"], rec["model_version"], rec["params"]["model"], rec["params"]["train"],
            meta.get("model_description", ""), meta.get("model_citation", ""), meta.get("recipe", "")))
        cell = cells.setdefault((column.key, row.key), Cell(column, row))
        (cell.ok if rec["status"] == "ok" else cell.failed).append(rec)
    if not cells:
        raise UsageError("no run records to aggregate; run `tokbench run` first or pass --records DIR")

    weight: Counter[str] = Counter()
    for (col_key, row_key), cell in cells.items():
        weight[col_key] += len(cell.ok) + len(cell.failed)
        weight[row_key] += len(cell.ok) + len(cell.failed)
    _name_columns(list(columns.values()), weight)
    _name_rows(list(rows.values()), weight)
    for cell in cells.values():
        _summarise_cell(cell)
    board = Leaderboard(sorted(columns.values(), key=lambda c: (c.task, c.label)),
                        sorted(rows.values(), key=lambda r: (r.model, r.label)), cells)
    for column in board.columns:
        column.bayes = _bayes(board.column_cells(column))
        _mark_best(board.column_cells(column))
    return board


def _summarise_cell(cell: Cell) -> None:
    if not cell.ok:
        return
    names = sorted({name for r in cell.ok for name, value in r["metrics"].items() if value is not None})
    for name in names:
        # A diagnostic is absent where it does not apply (null where it was not finite); it is averaged
        # over the runs that have it.
        cell.metrics[name] = summarise([r["metrics"][name] for r in cell.ok if r["metrics"].get(name) is not None])
    starts = [r["curve"]["accuracy"][0] for r in cell.ok if (r.get("curve") or {}).get("accuracy")]
    cell.untrained = summarise(starts) if len(starts) == len(cell.ok) and None not in starts else None
    for name in ("steps", "final_loss", "wall_seconds"):
        values = [r["train"][name] for r in cell.ok if _finite(r["train"].get(name))]
        setattr(cell, name, summarise(values) if values else None)


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def _bayes(cells: list[Cell]) -> Stat | None:
    """The column's Bayes-optimal accuracy: one value per seed (the data depend on the seed, not the model)."""
    per_seed: dict[int, float] = {}
    for cell in cells:
        for rec in cell.ok:
            if rec["metrics"].get("bayes_accuracy") is not None:
                per_seed.setdefault(rec["seed"], rec["metrics"]["bayes_accuracy"])
    return summarise([per_seed[s] for s in sorted(per_seed)]) if per_seed else None


def _mark_best(cells: list[Cell]) -> None:
    scored = [(round(c.accuracy.mean, DIGITS), c) for c in cells if c.accuracy is not None]
    if scored:
        top = max(score for score, _ in scored)
        for score, cell in scored:
            cell.best = score == top


def _name_columns(columns: list[Column], weight: Counter[str]) -> None:
    flats = [{"version": c.version, "split": c.eval_split, **c.params} for c in columns]
    labels = _labels([c.task for c in columns], flats, [weight[c.key] for c in columns])
    for column, label in zip(columns, labels):
        column.label = label
    _slugs(columns)


def _name_rows(rows: list[Row], weight: Counter[str]) -> None:
    flats = [{"version": r.version, **r.params, **{f"train.{k}": v for k, v in r.train.items()}} for r in rows]
    labels = _labels([r.model for r in rows], flats, [weight[r.key] for r in rows])
    for row, label in zip(rows, labels):
        row.label = label
    _slugs(rows)


def _labels(names: list[str], flats: list[dict[str, Any]], weights: list[int]) -> list[str]:
    """Name each configuration after its plugin name plus the parameters that set it apart.

    Among configurations of the same name, each parameter whose value differs has a
    base value: the one carried by the most records (the default suite runs defaults
    everywhere). A label lists only the parameters that differ from their base, e.g.
    ``attn-paper-a dtype=float32``; two configurations never get the same label.
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
