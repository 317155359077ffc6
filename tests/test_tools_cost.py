"""benchmark/tools/cost_by_task.py: the training time of a run's records, per task, with shares."""
from __future__ import annotations

import pytest

from leaderboard_synth import record, write
from script_modules import BENCHMARK, load_script

TOOL = BENCHMARK / "tools" / "cost_by_task.py"


@pytest.fixture(scope="module")
def cost_table():
    return load_script(TOOL).cost_table


def test_seconds_are_summed_per_task_and_shared_out(tmp_path, cost_table):
    # wall_seconds of a synthetic record is 1.5 + seed
    write(tmp_path, [record(seed=s) for s in range(3)] + [record(task="deterministic-walk", seed=4)])
    rows = cost_table(tmp_path, "task")
    assert rows[0][:3] == ("random-walk", 3, pytest.approx(1.5 + 2.5 + 3.5))
    assert rows[1][:3] == ("deterministic-walk", 1, pytest.approx(5.5))
    assert rows[-1][:3] == ("total", 4, pytest.approx(13.0))
    assert rows[0][3] == pytest.approx(7.5 / 13.0) and sum(row[3] for row in rows[:-1]) == pytest.approx(1.0)


def test_grouping_by_model(tmp_path, cost_table):
    write(tmp_path, [record(model="attn-paper-a", seed=0), record(model="uniform", seed=1)])
    assert [row[0] for row in cost_table(tmp_path, "model")] == ["uniform", "attn-paper-a", "total"]
