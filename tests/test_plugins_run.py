"""`tokbench run` as a plugin author uses it: any pairing by name, several --set values at once, Lightning loggers
stepped in optimiser steps, per-sample outputs beside the records; piped tables respect COLUMNS."""
from __future__ import annotations

import csv
import importlib.util
import json

import pytest

from tokbench.api import run
from tokbench.errors import UsageError
from tokbench.grid import expand, implied_suite, parse_settings
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
    reg = registry()  # what that run plans: both assignments applied
    (pairing,) = expand(implied_suite(reg, ["random-walk"], ["attn-rope"])[0], reg, ["random-walk"], ["attn-rope"], 1,
                        parse_settings(["p=0.7", "train.steps=5"]))
    assert pairing.variant.task_params["p"] == 0.7 and pairing.variant.recipe.steps == 5
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


def _installed(*packages: str) -> bool:
    return any(importlib.util.find_spec(package) is not None for package in packages)


TENSORBOARD_MISSING = not _installed("tensorboard", "tensorboardX")


@pytest.mark.parametrize("logger", [
    pytest.param("tensorboard", marks=pytest.mark.skipif(not TENSORBOARD_MISSING, reason="tensorboard or tensorboardX is installed")),
    pytest.param("wandb", marks=pytest.mark.skipif(_installed("wandb"), reason="wandb is installed")),
])
def test_a_logger_whose_package_is_missing_is_one_usage_line_before_any_work(cli, tmp_path, logger):
    out = tmp_path / "runs"
    result = cli("run", "--task", "random-walk", "--model", "uniform", "--logger", logger, "--out", str(out))
    assert result.returncode == 2 and result.stdout == "" and not out.exists()
    assert result.stderr.splitlines() == [
        f"tokbench: error: logger {logger!r} needs the {logger} package, which is not installed: pip install {logger}"
        f"{' (or tensorboardX)' if logger == 'tensorboard' else ''}; csv needs nothing more"]


def _scalar_steps(files: list, tag: str) -> list[int]:
    """The steps of the scalar ``tag`` in TensorBoard event files (TFRecord framing: length, its CRC, the Event
    protocol buffer, its CRC), read with tensorboardX's protocol buffer (the test extra's)."""
    import struct

    from tensorboardX.proto.event_pb2 import Event

    steps = []
    for path in files:
        data = path.read_bytes()
        offset = 0
        while offset < len(data):
            (length,) = struct.unpack("<Q", data[offset:offset + 8])
            event = Event.FromString(data[offset + 12:offset + 12 + length])
            offset += 12 + length + 4
            steps += [event.step for value in event.summary.value if value.tag == tag]
    return sorted(steps)


@pytest.mark.skipif(not _installed("tensorboardX"), reason="tensorboardX, of the test extra, is not installed")
def test_a_tensorboard_log_counts_optimiser_steps(cli, tmp_path):
    result = cli("run", "--task", "random-walk", "--model", "attn-rope", "--seeds", "1", "--set", *TINY,
                 "train.steps=25", "--logger", "tensorboard", "--out", str(tmp_path), "-q")
    assert result.returncode == 0, result.stderr[-2000:]
    (path,) = tmp_path.glob("*.json")
    record = json.loads(path.read_text())
    files = list((tmp_path / "logs" / path.name.removesuffix(".json")).glob("version_*/events.out.tfevents.*"))
    assert files, list(tmp_path.rglob("*"))
    # one point per optimiser step, as the record's curve has (Lightning's own steps are blocks of them)
    assert _scalar_steps(files, "train_loss") == list(range(25)) == record["curve"]["step"]


def test_piped_tables_respect_columns(cli):
    narrow = cli("ls", "models", env={"COLUMNS": "100"})
    assert narrow.returncode == 0 and max(map(len, narrow.stdout.splitlines())) <= 100
    wide = cli("ls", "models", env={"COLUMNS": ""})
    assert max(map(len, wide.stdout.splitlines())) > 100  # unset: nothing wraps, names stay whole for grep
