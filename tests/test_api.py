"""The notebook-friendly call: pairings in, records out, as `tokbench run` writes them."""
from __future__ import annotations

import pytest

from tokbench.api import run
from tokbench.errors import UsageError

TINY = ["train_size=64", "val_size=32", "test_size=64", "train.steps=3"]


def test_run_returns_one_record_per_pairing_and_resumes(tmp_path):
    records = run(tasks=["random-walk"], models=["attn-rope", "uniform"], seeds=2, settings=TINY, out=tmp_path)
    assert [(r["model"], r["seed"]) for r in records] == [("attn-rope", 0), ("attn-rope", 1), ("uniform", 0),
                                                          ("uniform", 1)]
    assert all(r["status"] == "ok" and 0 <= r["metrics"]["accuracy"] <= 1 for r in records)
    assert len(list(tmp_path.glob("*.json"))) == 4
    again = run(tasks=["random-walk"], models=["attn-rope", "uniform"], seeds=2, settings=TINY, out=tmp_path)
    assert [r["provenance"]["started_at"] for r in again] == [r["provenance"]["started_at"] for r in records]


def test_bad_names_are_usage_errors():
    with pytest.raises(UsageError, match="unknown task"):
        run(tasks=["no-such-task"])
