"""The published leaderboard/ folder never drifts from the run records committed with it."""
from __future__ import annotations

from pathlib import Path

import pytest

from tokbench.leaderboard.aggregate import build
from tokbench.leaderboard.plots import PLOTS_DIR, plan
from tokbench.leaderboard.publish import RECORDS_DIR, published_texts
from tokbench.leaderboard.records import load

PUBLISHED = Path(__file__).resolve().parents[1] / "leaderboard"
REGENERATE = "tokbench leaderboard --records leaderboard/records --format all --out leaderboard"


def test_published_folder_regenerates_from_its_records():
    records = PUBLISHED / RECORDS_DIR
    if not records.is_dir():
        pytest.skip("leaderboard/records is not committed yet; the published folder is generated from full runs of "
                    "the paper and default suites (see leaderboard/README.md once it exists)")
    board = build(load([records]))
    # The same texts `tokbench leaderboard --format all` writes; plots are planned, not drawn (their pixels may
    # differ across matplotlib versions), so the set of plot files is compared instead.
    for name, text in published_texts(board).items():
        assert text == (PUBLISHED / name).read_text(encoding="utf-8"), (
            f"leaderboard/{name} differs from what leaderboard/records gives; regenerate it with `{REGENERATE}`")
    expected = sorted(name for plot in plan(board) for name in plot.files)
    assert sorted(p.name for p in (PUBLISHED / PLOTS_DIR).iterdir()) == expected, f"regenerate with `{REGENERATE}`"
