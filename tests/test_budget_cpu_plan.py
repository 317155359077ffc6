"""benchmark/budget/cpu_plan.py: the CPU core-hours of a suite's plan, and the tables the budget README cites."""
from __future__ import annotations

import subprocess
import sys

import pytest

from script_modules import BUDGET, load_script

ARCHITECTURES = ["transformer", "transformer-2l", "transformer-4l", "linear-attention", "gla", "h3", "gru", "lstm",
                 "mlp", "mamba"]


@pytest.fixture(scope="module")
def plan_tool():
    return load_script(BUDGET / "cpu_plan.py")


def test_the_projection_is_seeds_times_replica_steps_times_the_step_cost(plan_tool):
    full = plan_tool.trained_variants("tokbench", ("causal-graph",), ("gru",))
    pruned = plan_tool.trained_variants("tokbench", ("causal-graph",), ("gru",), ("train.sweep_steps=1000",))
    assert len(full) == len(pruned) == 3  # one variant per rung, each with the suite's 3 seeds
    second = dict.fromkeys(full, 1.0)
    # GRU's recipe takes no weight decay: 3 rates, each to causal-graph's cap of 20000 steps, or each to 1000 and one
    # on to 20000
    assert plan_tool.project(full, second) == {"gru": {"causal-graph": 3 * 3 * 3 * 20000 / 3600}}
    assert plan_tool.project(pruned, second) == {"gru": {"causal-graph": 3 * 3 * (3 * 1000 + 19000) / 3600}}
    second[next(iter(full))] = None  # not applicable where the model says so when built
    assert plan_tool.project(full, second)["gru"]["causal-graph"] == pytest.approx(2 * 3 * 3 * 20000 / 3600)


def test_a_variant_with_records_is_projected_from_the_time_they_took(plan_tool):
    """Its seeds x the mean of its records' wall seconds (stops and evaluation included); a record of another
    plan, or a failed one, is not read."""
    pairings = plan_tool.trained_pairings("tokbench", ("causal-graph",), ("gru",), rung=1)
    variants = plan_tool.trained_variants("tokbench", ("causal-graph",), ("gru",), rung=1)
    assert [p.seed for p in pairings] == [0, 1, 2]
    records = [{"config_hash": pairing.config_hash, "status": status, "train": {"wall_seconds": seconds}}
               for pairing, seconds, status in zip(pairings, (1800.0, 3600.0, 99999.0), ("ok", "ok", "failed"))]
    records.append({"config_hash": "0" * 16, "status": "ok", "train": {"wall_seconds": 99999.0}})
    recorded = plan_tool.recorded_seconds(pairings, records)
    assert list(recorded.values()) == [[1800.0, 3600.0]]
    costs = dict.fromkeys(variants, 1.0)
    assert plan_tool.project(variants, costs, recorded) == {"gru": {"causal-graph": pytest.approx(3 * 0.75)}}
    assert plan_tool.project(variants, costs) == {"gru": {"causal-graph": 3 * 3 * 20000 / 3600}}


def test_a_rung_keeps_that_rung_of_every_ladder_and_a_cost_is_per_batch(plan_tool):
    middle = plan_tool.trained_variants("tokbench", ("causal-graph",), ("gru",), rung=1)
    ((variant, seeds),) = middle.values()
    assert variant.rung.index == 1 and variant.task_params["states"] == 7 and seeds == 3
    (other,) = plan_tool.trained_variants("tokbench", ("causal-graph",), ("gru",), ("train.batch_size=32",), rung=1)
    assert other not in middle  # another batch, another step cost: not read from the committed one


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(BUDGET / "cpu_plan.py"), *args], capture_output=True, text=True)


@pytest.mark.parametrize("extra", [[], ["--set", "train.sweep_steps=3000"],
                                   ["--rung", "1", "--records", str(BUDGET.parent / "republish" / "records")]])
def test_the_readme_tables_are_what_the_command_prints_on_the_committed_costs(extra):
    # --no-measure also checks that the committed costs cover every trained variant of the architecture ranking
    done = run("--model", *ARCHITECTURES, "--no-measure", "--markdown", *extra)
    assert done.returncode == 0, done.stderr
    table = "\n".join(done.stdout.splitlines()[1:])
    assert table in (BUDGET / "README.md").read_text(encoding="utf-8")


def test_a_bad_setting_is_one_line_and_exit_2():
    done = run("--set", "train.no_such_key=1", "--no-measure")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "no parameter 'no_such_key'" in done.stderr
