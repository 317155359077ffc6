"""`tokbench run` as a plugin author uses it: any pairing by name, several --set values at once, Lightning loggers
stepped in optimiser steps, per-sample outputs beside the records; piped tables respect COLUMNS."""
from __future__ import annotations

import csv
import importlib.util
import json

import pytest

from tokbench.api import run
from tokbench.errors import UsageError
from tokbench.grid import implied_suite
from tokbench.plugins import registry

TINY = ["train_size=64", "val_size=32", "test_size=64"]


def test_any_registered_pairing_runs_by_name_without_a_suite(cli, tmp_path):
    result = cli("run", "--task", "random-walk", "--model", "attn-alibi", "--seeds", "1", "--set", *TINY,
                 "train.steps=20", "--out", str(tmp_path), "-q")
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stderr.splitlines()[0] == ("tokbench: running from suite 'survey' (survey.toml): the default "
                                             "suite has no attn-alibi")
    (record,) = [json.loads(p.read_text()) for p in tmp_path.glob("*.json")]
    assert (record["task"], record["model"], record["status"]) == ("random-walk", "attn-alibi", "ok")


def test_the_default_suite_runs_where_it_has_every_named_task_and_model():
    reg = registry()
    assert implied_suite(reg, ["random-walk"], ["attn-rope"]) == (implied_suite(reg, [], [])[0], None)
    suite, why = implied_suite(reg, ["mqar"], ["transformer-2l", "attn-rope"])
    assert suite.name == "survey" and why == "the default suite has no transformer-2l"
    with pytest.raises(UsageError, match="unknown model"):
        implied_suite(reg, [], ["no-such-model"])


def test_set_takes_several_assignments_like_task(cli, tmp_path):
    result = cli("run", "--task", "random-walk", "--model", "attn-rope", "--seeds", "1", "--dry-run",
                 "--set", "p=0.7", "train.steps=5", "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    shown = cli("show", "task", "random-walk", "--set", "p=0.7", "K=4", "--json")
    assert json.loads(shown.stdout)["resolved"] | {"p": 0.7, "K": 4} == json.loads(shown.stdout)["resolved"]


def test_a_csv_log_counts_optimiser_steps_and_samples_match_the_record(cli, tmp_path):
    result = cli("run", "--task", "icl-markov", "--model", "attn-rope", "--seeds", "1", "--set", *TINY,
                 "train.steps=25", "--logger", "csv", "--log-samples", "--out", str(tmp_path), "-q")
    assert result.returncode == 0, result.stderr[-2000:]
    (path,) = tmp_path.glob("*.json")
    record = json.loads(path.read_text())
    stem = path.name.removesuffix(".json")
    (log,) = (tmp_path / "logs" / stem).glob("version_*/metrics.csv")
    steps = [int(row["step"]) for row in csv.DictReader(log.open())]
    assert steps == list(range(25)) == record["curve"]["step"]  # one row per optimiser step, as the curve has
    header, *rows = [json.loads(line) for line in (tmp_path / f"{stem}.samples.jsonl").read_text().splitlines()]
    assert header["format"] == "tokbench-samples/1" and header["written"] == header["sequences"] == len(rows) == 64
    per_sequence = []
    for row in rows:
        scored = [(label, guess) for label, guess in zip(row["label"], row["prediction"]) if label is not None]
        per_sequence.append(sum(label == guess for label, guess in scored) / len(scored))
        assert all(0 <= p <= 1 for p in row["bayes_label_probability"] if p is not None)
    assert sum(per_sequence) / len(per_sequence) == pytest.approx(record["metrics"]["accuracy"], abs=1e-12)


def test_loggers_and_callbacks_through_the_api(tmp_path):
    import pytorch_lightning as pl

    records = run(["random-walk"], ["attn-nope"], seeds=1, settings=[*TINY, "train.steps=12"], out=tmp_path,
                  loggers=["csv"], callbacks=[pl.callbacks.Timer()])
    assert records[0]["status"] == "ok"
    assert list((tmp_path / "logs").glob("*/version_0/metrics.csv"))
    if importlib.util.find_spec("wandb") is None:  # a logger whose package is missing: one line before any work
        with pytest.raises(UsageError, match="pip install wandb"):
            run(["random-walk"], ["attn-nope"], out=tmp_path / "w", loggers=["wandb"])
        assert not (tmp_path / "w").exists()


def test_piped_tables_respect_columns(cli):
    narrow = cli("ls", "models", env={"COLUMNS": "100"})
    assert narrow.returncode == 0 and max(map(len, narrow.stdout.splitlines())) <= 100
    wide = cli("ls", "models", env={"COLUMNS": ""})
    assert max(map(len, wide.stdout.splitlines())) > 100  # unset: nothing wraps, names stay whole for grep
