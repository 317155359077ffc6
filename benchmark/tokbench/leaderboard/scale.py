"""The score scale of one run, and which accuracy of a record is scored: final, at a budget, or at an evaluation.

A record of schema v3 carries, beside its test ``accuracy``, the ``chance_accuracy`` of the
best input-independent guess and the ``oracle_accuracy`` of the task's Bayes predictor, both
on the same test sequences. Its score is ``(accuracy - chance) / (oracle - chance)``: 0 is
the best guess that ignores the input, 1 the optimum, so the oracle row is exactly 1. An
older record (v1/v2) lacks them and keeps the old scale, ``accuracy / bayes_accuracy``; a
score says which scale it is on (:data:`CHANCE_SCALE` or :data:`BAYES_SCALE`).

A *pick* chooses what of a record is scored: its final metrics (:func:`final`), its test
accuracy at a training budget (:func:`at_budget`), or one of its extra evaluations
(:func:`at_evaluation`). A pick returns the metrics to score, ``None`` where the record has
none, or :class:`NotApplicable` with the record's reason.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Union

from tokbench.leaderboard.aggregate import format_value
from tokbench.leaderboard.stats import binomial_var
from tokbench.suites import MULTIPLE

CHANCE_SCALE = "(accuracy - chance) / (oracle - chance)"
BAYES_SCALE = "accuracy / Bayes optimum"
FINAL = "final"


@dataclass(frozen=True)
class NotApplicable:
    reason: str


Metrics = dict[str, Any]
Picked = Union[Metrics, NotApplicable, None]
Pick = Callable[[dict[str, Any]], Picked]


def scale(metrics: Metrics) -> str:
    """The scale ``metrics`` are scored on: the chance-to-oracle scale where both primary fields are present."""
    if metrics.get("chance_accuracy") is not None and metrics.get("oracle_accuracy") is not None:
        return CHANCE_SCALE
    return BAYES_SCALE


def _span(metrics: Metrics) -> tuple[float, float] | None:
    """(offset, width) of the scale: score = (accuracy - offset) / width; None where the width is not positive."""
    if scale(metrics) == CHANCE_SCALE:
        offset, width = metrics["chance_accuracy"], metrics["oracle_accuracy"] - metrics["chance_accuracy"]
    else:
        offset, width = 0.0, metrics.get("bayes_accuracy") or 0.0
    return (offset, width) if width > 0 else None


def score(metrics: Metrics) -> float | None:
    """The run's score on its scale; None where the scale has no width (the optimum is the best blind guess)."""
    span = _span(metrics)
    accuracy = metrics.get("accuracy")
    if span is None or accuracy is None:
        return None
    return (accuracy - span[0]) / span[1]


def eval_var(metrics: Metrics, examples: int | None, seeds: int) -> float:
    """The evaluation-set variance of one run's score: the accuracy's binomial variance over the squared width.

    ``examples`` is the test split's size (unknown: 0). Chance and oracle are measured on the
    same sequences, so they move with the accuracy and add no variance of their own here.
    """
    span = _span(metrics)
    if span is None or not examples or metrics.get("accuracy") is None:
        return 0.0
    return binomial_var(metrics["accuracy"], examples, seeds) / span[1] ** 2


def lower_bound(metrics: Metrics) -> float:
    """The lowest value the run's score can have: an accuracy of 0."""
    span = _span(metrics)
    return -span[0] / span[1] if span else -math.inf


def upper_bound(metrics: Metrics) -> float:
    """The highest value the run's *expected* score can have: 1 on the chance scale (no predictor beats the
    Bayes predictor in expectation on the same sequences), 1 / optimum on the old scale (a perfect accuracy)."""
    if scale(metrics) == CHANCE_SCALE:
        return 1.0
    bayes = metrics.get("bayes_accuracy")
    return 1 / bayes if bayes else math.inf


def final(record: dict[str, Any]) -> Picked:
    """The record's own metrics: its accuracy at the end of training."""
    return record["metrics"]


def at_budget(step: int) -> Pick:
    """The record's test accuracy after ``step`` training steps, from its ``budget_curve``.

    A run that stopped before ``step`` keeps its final accuracy (training had ended); a run
    that takes no steps (a baseline) is its final accuracy at every budget; a run without a
    curve has none.
    """
    def pick(record: dict[str, Any]) -> Picked:
        curve = record.get("budget_curve") or []
        point = next((p for p in curve if p["step"] == step and not p.get("final")), None)
        last = next((p for p in curve if p.get("final")), None)
        if point is None and last is not None and last["step"] <= step:
            point = last
        if point is not None:
            return {**record["metrics"], "accuracy": point["accuracy"]}
        return record["metrics"] if not curve and not (record.get("train") or {}).get("steps") else None

    return pick


def budgets(records: list[dict[str, Any]]) -> list[int]:
    """The budgets the records' curves were evaluated at (final steps left out), in order."""
    return sorted({p["step"] for r in records for p in r.get("budget_curve") or [] if not p.get("final")})


def setting(record: dict[str, Any], overrides: dict[str, Any]) -> str:
    """An evaluation setting's name, relative to the training value where both are numbers: ``context_length x2``.

    A multiple the task could not resolve (it has no such parameter, so the setting did not apply) keeps its
    name as declared, ``x2``, so that it shares its column with the resolved ones.
    """
    trained = record["params"]["task"]
    parts = []
    for key in sorted(overrides):
        value, base = overrides[key], trained.get(key)
        numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (value, base))
        if numbers and base:
            parts.append(f"{key} x{value / base:g}")
        elif isinstance(value, str) and (multiple := MULTIPLE.match(value)):
            parts.append(f"{key} x{multiple.group(1)}")
        else:
            parts.append(f"{key}={format_value(value)}")
    return ", ".join(parts)


def settings(records: list[dict[str, Any]]) -> list[str]:
    """Every evaluation setting the records carry, in the order first seen."""
    return list(dict.fromkeys(setting(r, e["overrides"]) for r in records for e in r.get("evaluations") or []))


def at_evaluation(name: str) -> Pick:
    """The metrics of the record's evaluation named ``name`` (see :func:`setting`), or why it does not apply."""
    def pick(record: dict[str, Any]) -> Picked:
        for entry in record.get("evaluations") or []:
            if setting(record, entry["overrides"]) == name:
                if entry.get("status") == "ok":
                    return entry["metrics"]
                return NotApplicable(entry.get("reason") or "not applicable")
        return None

    return pick
