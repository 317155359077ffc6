"""The worked external plugin, plugins/tokbench-qa: installed through its entry point, it passes its own tests
(the conformance kit included), and its suite puts [A]'s bag-of-words result on the leaderboard."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from plugin_install import installed
from tokbench.plugins import registry

QA = Path(__file__).resolve().parents[1] / "plugins" / "tokbench-qa"
TASKS = ("qa-fruit-count", "qa-fruit-preference")
TEST_SIZE = 1000  # the tasks' default test split


def within_four_standard_errors(accuracy: float, expected: float) -> bool:
    """Within four standard errors of a proportion ``expected`` measured on the test split."""
    return abs(accuracy - expected) <= 4 * math.sqrt(expected * (1 - expected) / TEST_SIZE)


def test_tokbench_does_not_register_the_qa_plugin():
    assert not set(TASKS) & set(registry().tasks)


@pytest.fixture(scope="module")
def qa_env(tmp_path_factory):
    with installed(QA, "tokbench-qa", tmp_path_factory.mktemp("qa-env")) as env:
        yield env


def test_installed_plugin_lists_its_tasks_and_passes_its_tests(qa_env):
    listing = json.loads(qa_env.tokbench("ls", "tasks", "--json").stdout)
    assert {s["name"]: s["plugin"] for s in listing if s["name"] in TASKS} == dict.fromkeys(TASKS, "tokbench-qa")
    tests = qa_env.run("-m", "pytest", "-q", "-p", "no:cacheprovider", cwd=QA, timeout=600)
    assert tests.returncode == 0, tests.stdout[-3000:] + tests.stderr[-2000:]


def test_suite_shows_the_bag_of_words_failure_on_the_leaderboard(qa_env, tmp_path):
    """[A]: averaging attention counts the majority fruit (~100%) but stays at 50% on the preference, whose two
    sentences are anagrams. Finding: the walk recipe's positions (norm 20) select a single list item, 11/16."""
    out = tmp_path / "records"
    qa_env.check("-m", "tokbench.cli", "run", "--suite", str(QA / "suite.toml"), "--seeds", "1", "--out", str(out),
                 "--jobs", "1", "--quiet", timeout=600)
    records = [json.loads(p.read_text()) for p in out.glob("*.json")]
    accuracy = {(r["task"], r["params"]["model"]["position_norm"]): r["metrics"]["accuracy"] for r in records}
    assert accuracy[("qa-fruit-count", 0.01)] >= 0.99
    assert within_four_standard_errors(accuracy[("qa-fruit-preference", 0.01)], 0.5)
    assert within_four_standard_errors(accuracy[("qa-fruit-count", 20.0)], 11 / 16)
    assert within_four_standard_errors(accuracy[("qa-fruit-preference", 20.0)], 0.5)

    board = qa_env.check("-m", "tokbench.cli", "leaderboard", "--records", str(out), "--format", "md").stdout
    assert "qa-fruit-count" in board and "qa-fruit-preference" in board and "attn-paper-a" in board
