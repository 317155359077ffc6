"""Contract v2 end to end: the test plugin (tests/fake_plugins/contract_v2.py) installed through a real entry
point, run by `tokbench run` beside built-in models, and read back by `tokbench leaderboard`."""
from __future__ import annotations

import json

SIZES = ["--set", "train_size=128", "--set", "val_size=64", "--set", "test_size=64"]


def test_run_and_leaderboard_through_the_v2_plugin(cli, plugin_site, tmp_path):
    env = plugin_site(v2="contract_v2")
    out = tmp_path / "runs"
    result = cli("run", "--task", "previous-token", "--model", "two-layer-attention", "last-position-attention",
                 "uniform", "--seeds", "1", *SIZES, "--out", str(out), "-q", env=env)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    records = {r["model"]: r for r in (json.loads(p.read_text()) for p in out.glob("*.json"))}
    assert set(records) == {"two-layer-attention", "last-position-attention", "uniform"}

    learned = records["two-layer-attention"]
    assert learned["status"] == "ok" and learned["metrics"]["accuracy"] >= 0.9
    assert learned["diagnostics"]["previous_attention"]["layer"] == "first"
    assert isinstance(learned["diagnostics"]["previous_attention"]["head"], int)  # "best" resolved to a head
    assert {"loss", "bayes_loss", "excess_loss", "excess_loss_se", "agree_copy_current"} <= set(learned["metrics"])
    assert learned["params"]["train"]["optimizer"] == "adamw" and learned["params"]["train"]["schedule"] == "cosine"
    assert learned["train"]["steps"] <= learned["params"]["train"]["steps"]

    assert records["last-position-attention"]["status"] == "not_applicable"  # predicts only the last position
    assert "last position" in records["last-position-attention"]["error"]
    assert records["uniform"]["status"] == "ok" and records["uniform"]["train"]["steps"] == 0

    board = cli("leaderboard", "--records", str(out), "--format", "md", env=env)
    assert board.returncode == 0, board.stderr
    assert "two-layer-attention" in board.stdout and "n/a" in board.stdout
