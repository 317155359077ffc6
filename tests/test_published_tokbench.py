"""The committed records of the tokbench rerun (in progress in shards) carry what the protocol promises: budget
curves, a real stopping rule, and accuracy at more than one context length."""
from __future__ import annotations

from pathlib import Path

from tokbench.results import load_records

RECORDS = Path(__file__).resolve().parents[1] / "leaderboard" / "records" / "tokbench"


def test_records_carry_budget_curves_real_stopping_and_longer_lengths():
    loaded = load_records(RECORDS)
    records = [r for r in loaded.records.values() if r["status"] == "ok"]
    assert records and not loaded.problems
    trained = [r for r in records if r["train"]["steps"]]
    assert all(r.get("budget_curve") and r["train"]["stopped_because"] in ("target", "plateau", "cap")
               for r in trained)
    assert len({r["train"]["steps"] for r in trained}) > 1  # stopping is real, not a fixed count
    lengths = {e["overrides"]["context_length"] for r in records for e in r.get("evaluations") or []
               if e["status"] == "ok"}
    assert len(lengths) > 1
