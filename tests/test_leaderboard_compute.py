"""A section's compute: core-hours from the records' wall-clock seconds and threads, split per task and model."""
from __future__ import annotations

import json

import pytest

from leaderboard_synth import record, sections, write
from tokbench.leaderboard.compute import build_compute, compute_of, core_seconds
from tokbench.cli import main


def _timed(task: str, model: str, seed: int, seconds: float, threads: int | None = None) -> dict:
    rec = record(task=task, model=model, seed=seed)
    rec["train"]["wall_seconds"] = seconds
    if threads is not None:
        rec["provenance"]["threads"] = threads
    rec["provenance"]["cpu"] = "x86_64 test CPU"
    return rec


def test_core_time_is_wall_seconds_times_threads_and_splits_add_up() -> None:
    records = [_timed("random-walk", "attn-rope", 0, 1800.0), _timed("random-walk", "gru", 0, 900.0, threads=2),
               _timed("deterministic-walk", "gru", 0, 3600.0)]
    compute = compute_of(records)
    assert compute is not None
    assert compute.core_hours == pytest.approx(0.5 + 0.5 + 1.0)
    assert compute.by_task == pytest.approx({"random-walk": 1.0, "deterministic-walk": 1.0})
    assert compute.by_model == pytest.approx({"attn-rope": 0.5, "gru": 1.5})
    assert (compute.runs, compute.untimed, compute.cpus) == (3, 0, ("x86_64 test CPU",))
    assert compute.text().startswith("2.00 core-hours over 3 runs")


def test_failed_runs_count_and_untimed_ones_are_counted_apart() -> None:
    failed = record(seed=1, error="boom")
    failed["train"] = {"wall_seconds": 360.0}
    untimed = record(seed=2)
    del untimed["train"]["wall_seconds"]
    assert core_seconds(untimed) is None
    compute = build_compute(sections([_timed("random-walk", "attn-paper-a", 0, 360.0), failed, untimed])[0].board)
    assert compute is not None
    assert compute.core_hours == pytest.approx(0.2)
    assert (compute.runs, compute.untimed) == (2, 1)
    assert "(1 more carry no time)" in compute.text()


def test_no_timed_record_means_no_compute() -> None:
    untimed = record()
    del untimed["train"]["wall_seconds"]
    assert compute_of([untimed]) is None


def test_the_published_files_carry_the_compute(tmp_path) -> None:
    folder = write(tmp_path / "records", [_timed("random-walk", "attn-rope", s, 720.0) for s in range(3)])
    out = tmp_path / "board"
    assert main(["leaderboard", "--records", str(folder), "--format", "all", "--out", str(out)]) == 0
    data = json.loads((out / "leaderboard.json").read_text())
    compute = data["sections"][0]["compute"]
    assert compute["core_hours"] == pytest.approx(0.6)
    assert compute["by_model"] == {"attn-rope": pytest.approx(0.6)}
    readme, details = (out / "README.md").read_text(), (out / "details.md").read_text()
    assert "0.60 core-hours over 3 runs" in readme and "| random-walk | 0.60 | 100 |" in readme  # per family
    assert "| attn-rope | 0.60 | 100 |" not in readme and "| attn-rope | 0.60 | 100 |" in details  # per model
