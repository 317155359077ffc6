"""Adaptive seeds: cells get seeds until their interval is narrow enough or the cap is hit, and records say why."""
from __future__ import annotations

import math
from pathlib import Path

import pytest

from run_support import write_suite
from test_records import PROVENANCE
from tokbench import adaptive
from tokbench.cli import main
from tokbench.errors import UsageError
from tokbench.grid import expand
from tokbench.leaderboard import stats
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
    assert wide.more == 17  # a spread of 0.1 needs ~100 seeds for +-0.02: the cap of 20 runs

    assert [p.seed for p in adaptive.more_seeds(wide)][:3] == [3, 4, 5]
    capped = adaptive.decide(grid, records, adaptive.Target(0.02, 3))
    assert {d.stopped for d in capped} == {adaptive.REACHED, adaptive.CAPPED}


def test_a_cell_scored_on_a_split_of_unknown_size_stops_at_once_since_no_interval_can_be_computed():
    suite = 'description = "s"\nseeds = 3\n[[grid]]\ntasks = ["scc-implicit-bias"]\nmodels = ["uniform"]\n'
    grid = expand(parse_suite(suite, "s.toml", "s"), registry())
    records = _records(grid, lambda p: {0: 0.3, 1: 0.5, 2: 0.4}[p.seed])
    (decision,) = adaptive.decide(grid, records, adaptive.Target(0.02, 20))
    assert decision.stopped == adaptive.UNSIZED and decision.more == 0 and decision.half_width is None


def test_the_seeds_asked_for_account_for_the_t_quantile_falling_with_n():
    """Three seeds with a spread of 0.012: t(2) = 4.30 puts the half-width at 0.030. Scaling that width by
    sqrt(n / n') would ask for 7 seeds; with t(n' - 1) the same spread reaches +-0.02 at 4 (3.18 * 0.012 / sqrt 4)."""
    values = [0.80, 0.812, 0.788]
    assert stats.seeds_needed(values, 0.0, 0.02, 20) == 4
    assert math.ceil(3 * (stats.summarise(values).width / 2 / 0.02) ** 2) == 7
    # the evaluation sets' own error is a floor: 0.16 / 1000 per seed needs n >= 1.96^2 * 0.16e-3 / 0.02^2 = 1.5
    assert stats.seeds_needed([0.8, 0.8, 0.8], 0.16 / 1000, 0.02, 20) == 4  # more than the 3 it has
    assert stats.seeds_needed([0.8, 0.8, 0.8], 0.16 / 100, 0.02, 20) == 16  # 1.96^2 * 0.0016 / 0.0004 = 15.4
    assert stats.seeds_needed([0.3, 0.5, 0.4], 0.0, 0.02, 20) == 20 and stats.seeds_needed([0.5], 0.0, 0.02, 20) == 2


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
    (run,) = [line for line in lines if line.startswith("tokbench run --suite default ")]
    assert run.endswith("--target-ci 0.05 --max-seeds 5 --out lb/records/default")


def test_the_suite_can_set_the_target(tmp_path):
    text = SUITE.format(test_size=32) + "[adaptive]\ntarget_ci = 0.5\nmax_seeds = 4\n"
    out = tmp_path / "runs"
    assert main(["run", "--suite", str(write_suite(tmp_path, text)), "--out", str(out), "-q", "-j", "1"]) == 0
    records = list(load_records(out).records.values())
    assert {r["adaptive"]["stopped"] for r in records} == {adaptive.REACHED}
    assert all(r["adaptive"]["half_width"] <= 0.5 and r["adaptive"]["target_ci"] == 0.5 for r in records)


@pytest.mark.parametrize("rerun", ["missing", "failed"])
def test_an_added_seed_that_failed_is_retried_by_rerun_failed_only(tmp_path, rerun):
    grid = [p for p in _grid() if p.model_spec.name == "uniform"]
    spread = {0: 0.3, 1: 0.5, 2: 0.4}
    records = _records(grid, lambda p: spread.get(p.seed, 0.45))
    first_extra = adaptive.more_seeds(adaptive.decide(grid, records, adaptive.Target(0.02, 4))[0])[0]
    failed = record_of(first_extra, Outcome("2026-01-01T00:00:00Z", 0.1, error="RuntimeError: died"), PROVENANCE)
    trained: list[int] = []

    def train(pairings):
        trained.extend(p.seed for p in pairings)
        return _records(pairings, lambda p: 0.45)

    adaptive.run_until(grid, records, {failed["config_hash"]: failed}, adaptive.Target(0.02, 4), train, tmp_path,
                       rerun)
    assert trained == ([3] if rerun == "failed" else [])
