"""What a section's records cost to produce, in core-hours: in total, per task family and per model.

A run's cost is its ``train.wall_seconds`` (the whole pairing in its worker: data, training, every
evaluation) times the torch threads it ran with (``provenance.threads``, 1 by default), so the sum is
core time whatever ``--jobs`` was. Failed runs count: their time was spent too. Worker start-up and
the driver are not in any record and are left out.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from tokbench.leaderboard.aggregate import Leaderboard
from tokbench.leaderboard.views import Number, Table, Value

HOUR = 3600.0


@dataclass(frozen=True)
class Compute:
    """Core-hours of the ``runs`` records that carry a time (``untimed`` do not: older or untrained records)."""

    core_hours: float
    by_task: dict[str, float]
    by_model: dict[str, float]
    runs: int
    untimed: int
    cpus: tuple[str, ...]

    def text(self) -> str:
        """One sentence: the total, what it is the sum of, and where it ran."""
        machine = ", ".join(self.cpus) or "an unrecorded CPU"
        untimed = f" ({self.untimed} more carry no time)" if self.untimed else ""
        return (f"{self.core_hours:.2f} core-hours over {self.runs} runs{untimed}, the sum of each run's "
                f"wall-clock seconds in its worker times its torch threads, on {machine}.")

    def tables(self) -> list[Table]:
        """The split per task family and per model, largest first, with each one's share of the total."""
        def table(by: str, split: dict[str, float]) -> Table:
            rows: list[list[Value]] = [[name, Number(hours, ".2f"), Number(100 * hours / self.core_hours, ".0f")]
                                       for name, hours in sorted(split.items(), key=lambda item: (-item[1], item[0]))]
            return Table(f"Compute per {by}", [by, "core-hours", "share %"], rows)
        return [table("task family", self.by_task), table("model", self.by_model)]

    def to_json(self) -> dict[str, Any]:
        return {"core_hours": round(self.core_hours, 4), "runs": self.runs, "untimed": self.untimed,
                "cpus": list(self.cpus),
                "by_task": {k: round(v, 4) for k, v in sorted(self.by_task.items())},
                "by_model": {k: round(v, 4) for k, v in sorted(self.by_model.items())}}


def core_seconds(record: dict[str, Any]) -> float | None:
    """The core time of one run record, or None when it carries no wall-clock time."""
    seconds = (record.get("train") or {}).get("wall_seconds")
    if not isinstance(seconds, (int, float)):
        return None
    return float(seconds) * int((record.get("provenance") or {}).get("threads") or 1)


def build_compute(board: Leaderboard) -> Compute | None:
    """The section's compute, from every ok and failed record; None when no record carries a time."""
    return compute_of(rec for cell in board.cells.values() for rec in cell.ok + cell.failed)


def compute_of(records: Iterable[dict[str, Any]]) -> Compute | None:
    by_task: dict[str, float] = defaultdict(float)
    by_model: dict[str, float] = defaultdict(float)
    runs = untimed = 0
    cpus: set[str] = set()
    for record in records:
        seconds = core_seconds(record)
        if seconds is None:
            untimed += 1
            continue
        runs += 1
        by_task[record["task"]] += seconds / HOUR
        by_model[record["model"]] += seconds / HOUR
        cpus.add(str((record.get("provenance") or {}).get("cpu") or "unknown"))
    if not runs:
        return None
    return Compute(sum(by_task.values()), dict(by_task), dict(by_model), runs, untimed, tuple(sorted(cpus)))
