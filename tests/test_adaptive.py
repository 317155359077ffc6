"""Adaptive seeds: cells get seeds until their interval is narrow enough or the cap is hit, and records say why."""
from __future__ import annotations

import math
from pathlib import Path

import pytest

from run_support import write_suite
from tokbench import adaptive
from tokbench.cli import main
from tokbench.errors import UsageError
from tokbench.grid import expand
from tokbench.leaderboard.aggregate import Section
from tokbench.leaderboard.publish import regenerate_commands
from tokbench.plugins import registry
from tokbench.results import load_records
from tokbench.harness import PairingResult
from tokbench.outcome import Outcome, record_of
from tokbench.suites import parse_suite

SUITE = """
seeds = 3
[[grid]]
tasks = ["random-walk"]
models = ["uniform", "last-token"]
[grid.task.random-walk]
context_length = 6
train_size = 64
val_size = 16
test_size = {test_size}
"""


def _grid(test_size: int = 1000):
    return expand(parse_suite(SUITE.format(test_size=test_size), "s.toml", "s"), registry())


PROVENANCE = {"tokbench_version": "0", "git_commit": None, "python": "3", "torch": "2", "lightning": "2",
              "device": "cpu"}


def _records(pairings, accuracy):
    def result(p):
        return PairingResult(metrics={"accuracy": accuracy(p), "bayes_accuracy": 0.5}, train={"steps": 0},
                             curve={"step": [0], "loss": [1.0], "accuracy": [0.17]})
    return {p.config_hash: record_of(p, Outcome("2026-01-01T00:00:00Z", 0.1, result=result(p)), PROVENANCE)
            for p in pairings}


def test_a_tight_cell_stops_and_a_spread_one_asks_for_the_seeds_its_spread_needs():
    grid = _grid()
    spread = {0: 0.3, 1: 0.5, 2: 0.4}
    records = _records(grid, lambda p: 0.5 if p.model_spec.name == "last-token" else spread[p.seed])
    goal = adaptive.Target(0.02, 20)
    decisions = {d.pairings[0].model_spec.name: d for d in adaptive.decide(grid, records, goal)}
    tight, wide = decisions["last-token"], decisions["uniform"]
    assert tight.stopped == adaptive.REACHED and tight.half_width <= 0.02 and tight.more == 0
    assert wide.stopped is None and wide.half_width > 0.2
    assert wide.more == min(math.ceil(3 * (wide.half_width / 0.02) ** 2), 20) - 3 == 17
    assert [p.seed for p in adaptive.more_seeds(wide)][:3] == [3, 4, 5]
    capped = adaptive.decide(grid, records, adaptive.Target(0.02, 3))
    assert {d.stopped for d in capped} == {adaptive.REACHED, adaptive.CAPPED}


def test_targets_are_checked():
    assert adaptive.target(None, None) is None
    assert adaptive.target(0.02, None) == adaptive.Target(0.02, 20)
    for bad in ((0.0, 5), (0.02, 1), (None, 5), (math.nan, 5)):
        with pytest.raises(UsageError):
            adaptive.target(*bad)


def test_run_with_a_target_adds_seeds_and_records_why_each_cell_stopped(tmp_path, capsys):
    suite = write_suite(tmp_path, SUITE.format(test_size=32))
    out = tmp_path / "runs"
    assert main(["run", "--suite", str(suite), "--target-ci", "0.05", "--max-seeds", "5", "--out", str(out),
                 "-q", "-j", "1"]) == 0
    err = capsys.readouterr().err
    assert f"records in {out}/; tables, HTML and plots: tokbench leaderboard --records {out} --format all" in err
    records = list(load_records(out).records.values())
    # 32 test sequences alone give a half-width near 0.17 / sqrt(n): neither cell can reach 0.05 in 5 seeds.
    assert len(records) == 10 and {r["seed"] for r in records} == set(range(5))
    assert {r["adaptive"]["stopped"] for r in records} == {adaptive.CAPPED}
    assert all(r["adaptive"]["seeds"] == 5 and r["adaptive"]["half_width"] > 0.05 for r in records)
    capsys.readouterr()
    assert main(["leaderboard", "--records", str(out), "--format", "json"]) == 0
    assert '"stopped": "max seeds"' in capsys.readouterr().out
    # The published folder's regenerate line repeats the target.
    lines = regenerate_commands([Section.of(records, "default")], Path("lb"))
    assert "tokbench run --suite default --target-ci 0.05 --max-seeds 5 --out lb/records/default" in lines


def test_the_suite_can_set_the_target(tmp_path):
    text = SUITE.format(test_size=32) + "[adaptive]\ntarget_ci = 0.5\nmax_seeds = 4\n"
    out = tmp_path / "runs"
    assert main(["run", "--suite", str(write_suite(tmp_path, text)), "--out", str(out), "-q", "-j", "1"]) == 0
    records = list(load_records(out).records.values())
    assert {r["adaptive"]["stopped"] for r in records} == {adaptive.REACHED}
    assert all(r["adaptive"]["half_width"] <= 0.5 and r["adaptive"]["target_ci"] == 0.5 for r in records)
