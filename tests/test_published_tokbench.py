"""What the published `tokbench` section must show (the protocol and length-generalisation issues), read from the
committed leaderboard.json and records."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tokbench.results import load_records

PUBLISHED = Path(__file__).resolve().parents[1] / "leaderboard"
RECORDS = PUBLISHED / "records" / "tokbench"


def _section() -> dict[str, Any]:
    sections = json.loads((PUBLISHED / "leaderboard.json").read_text(encoding="utf-8"))["sections"]
    found = next((s for s in sections if s["name"] == "tokbench"), None)
    assert found is not None, "leaderboard.json has no tokbench section"
    return found


def _score(row: dict[str, Any], column: str) -> dict[str, Any] | None:
    return row["scores"][column]["score"]


def _ranked_rows() -> dict[str, dict[str, Any]]:
    """Each learned model's row in its ranking, where its Overall is (the section has one per ranking)."""
    return {row["model"]: row for ranking in _section()["scores"]["rankings"] for row in ranking["rows"]
            if not (row["oracle"] or row["baseline"])}


def test_mqar_middle_rung_reproduces_zoologys_contrast():
    section = _section()
    (ladder,) = [lad for lad in section["scores"]["ladders"] if lad["task"] == "mqar"]
    middle = set(ladder["rungs"][1]["tasks"])
    accuracy = {cell["model"]: cell["metrics"]["accuracy"]["mean"] for cell in section["cells"]
                if cell["task"] in middle and cell["metrics"].get("accuracy")}
    assert accuracy["transformer-2l"] >= 0.9
    assert accuracy["gru"] <= accuracy["transformer-2l"] - 0.3


def test_a_learned_model_solves_sparse_selection():
    learned = [_score(r, "sparse-selection") for r in _ranked_rows().values()]
    assert max(s["mean"] for s in learned if s) >= 0.8


def test_every_single_attention_layer_has_an_overall_and_nothing_exceeds_one():
    ranked = _ranked_rows()
    attention = [r for model, r in ranked.items() if model.startswith("attn-")]
    assert attention and all(_score(r, "Overall") for r in attention)
    for row in (row for ranking in _section()["scores"]["rankings"] for row in ranking["rows"]):
        for table in (row["scores"], *row["by_budget"].values(), *row["length"].values()):
            for entry in table.values():
                if entry["score"]:
                    assert entry["score"]["mean"] <= 1.0 and (entry["score"]["high"] or 0.0) <= 1.0, row["model"]


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


def test_the_section_has_a_length_score_per_model_and_na_with_a_reason():
    scores = _section()["scores"]
    assert scores["length_settings"]
    rows = _ranked_rows()
    for setting in scores["length_settings"]:
        for row in rows.values():
            for entry in row["length"][setting].values():
                assert entry["score"] is None or not entry["not_applicable"]
                assert not entry["not_applicable"] or entry.get("reason")
        # a model that runs unchanged at the longer length has a number there; one that cannot extend, n/a
        for model in ("transformer-2l", "gru", "attn-nope", "attn-alibi", "attn-t5bias", "linear-attention"):
            assert rows[model]["length"][setting]["Overall"]["score"] is not None, (model, setting)
        for model in ("attn-learned", "attn-onehot-concat", "mlp"):
            overall = rows[model]["length"][setting]["Overall"]
            assert overall["score"] is None and overall["not_applicable"] and overall["reason"], (model, setting)


def test_the_readme_names_the_budget_before_the_score_table_and_states_the_cost():
    section = _section()
    page = (PUBLISHED / "README.md").read_text(encoding="utf-8")
    part = page[page.index("## tokbench"):]
    assert part.index("Training budget") < part.index("| model | Overall")
    hours = section["compute"]["core_hours"]
    readme = (PUBLISHED.parent / "README.md").read_text(encoding="utf-8")
    assert f"{hours:.1f} core-hours" in readme  # the top-level README states the measured cost
