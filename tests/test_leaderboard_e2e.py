"""From a real `tokbench run` of a third-party plugin with hostile strings to escaped tables in every format."""
from __future__ import annotations

import json
from dataclasses import replace

from tokbench.cli import main
from tokbench.plugins import registry

SIZES = ["--set", "task.train_size=64", "--set", "task.val_size=32", "--set", "task.test_size=64",
         "--set", "task.context_length=12", "--set", "train.steps=5"]


def test_run_then_leaderboard_escapes_plugin_strings(tmp_path, cli, plugin_site, capsys):
    # the default suite names its baselines, so their plugin stays in
    env = {**plugin_site(evil="evil_strings"), "TOKBENCH_PLUGINS": "evil,walks,attention,baselines"}
    runs = tmp_path / "runs"
    done = cli("run", "--task", "evil-walk", "--model", "attn-paper-a", "--seeds", "2", *SIZES, "--out", str(runs),
               "-q", "-j", "1", env=env, timeout=300)
    assert done.returncode == 0, done.stderr

    assert main(["leaderboard", "--records", str(runs), "--format", "json"]) == 0
    (data,) = json.loads(capsys.readouterr().out)["sections"]
    (task,) = data["tasks"]
    assert task["description"] == "<script>alert(1)</script> a|b & c" and task["params"]["tag"] == "x|y&<z>"
    assert data["cells"][0]["seeds"] == [0, 1] and data["cells"][0]["metrics"]["parent_attention"]["n"] == 2

    for fmt, raw in (("md", "<script>"), ("html", "<script>alert"), ("latex", " & c")):
        assert main(["leaderboard", "--records", str(runs), "--format", fmt]) == 0
        text = capsys.readouterr().out
        assert raw not in text, fmt
    assert main(["leaderboard", "--records", str(runs), "--format", "md"]) == 0
    md = capsys.readouterr().out
    assert r"&lt;script&gt;alert(1)&lt;/script&gt; a\|b &amp; c" in md and r"tag=x\|y&amp;&lt;z&gt;" in md


def test_labels_are_relative_to_the_specs_defaults_not_to_the_first_value(tmp_path, capsys):
    """p=0.2 sorts before the default 0.5: the bare column must still be the default."""
    runs = tmp_path / "runs"
    small = ["--set", "task.train_size=16", "--set", "task.val_size=16", "--set", "task.test_size=16",
             "--set", "task.context_length=6"]
    for extra in ([], ["--set", "task.p=0.2"]):
        args = ["run", "--task", "random-walk", "--model", "uniform", "--seeds", "1", *small, *extra,
                "--out", str(runs), "-q", "-j", "1"]
        assert main(args) == 0
    capsys.readouterr()
    assert main(["leaderboard", "--records", str(runs), "--format", "json"]) == 0
    (data,) = json.loads(capsys.readouterr().out)["sections"]
    assert {t["label"]: t["params"]["p"] for t in data["tasks"]} == {"random-walk": 0.5, "random-walk p=0.2": 0.2}


def test_schema_2_records_not_applicable_pairings_show_n_a(tmp_path, capsys, monkeypatch):
    """A task scored at every position and a model that predicts only the last one: n/a, never a failure."""
    last_only = replace(registry().model("attn-nope"), predicts="last")  # the attn-* layers predict every position
    monkeypatch.setitem(registry().models, last_only.name, last_only)
    runs = tmp_path / "runs"
    small = ["--set", "task.train_size=32", "--set", "task.val_size=16", "--set", "task.test_size=32"]
    assert main(["run", "--task", "mqar", "--model", "uniform", "attn-nope", "--seeds", "3", *small,
                 "--out", str(runs), "-q", "-j", "1"]) == 0
    capsys.readouterr()
    assert main(["leaderboard", "--records", str(runs), "--format", "md"]) == 0
    md = capsys.readouterr().out
    row = next(line for line in md.splitlines() if line.startswith("| attn-nope |"))
    assert row == "| attn-nope | n/a |"
    findings = md.split("## Findings", 1)[1].split("\n## ", 1)[0]
    assert "attn-nope" not in findings and "failed" not in row
    assert main(["leaderboard", "--records", str(runs), "--format", "json"]) == 0
    (data,) = json.loads(capsys.readouterr().out)["sections"]
    cell = next(c for c in data["cells"] if c["model"] == "attn-nope")
    assert cell["failed_seeds"] == [] and len(cell["not_applicable"]) == 3 and cell["metrics"] == {}
