"""The published leaderboard/ folder never drifts from the run records committed with it."""
from __future__ import annotations

from pathlib import Path

import pytest

from tokbench.cli import main
from tokbench.leaderboard.publish import FILES, RECORDS_DIR

PUBLISHED = Path(__file__).resolve().parents[1] / "leaderboard"


def test_published_folder_regenerates_from_its_records(tmp_path):
    records = PUBLISHED / RECORDS_DIR
    if not records.is_dir():
        pytest.skip("leaderboard/records is not committed yet; the published folder is generated from full runs of "
                    "the paper and default suites (see leaderboard/README.md once it exists)")
    assert main(["leaderboard", "--records", str(records), "--format", "all", "--out", str(tmp_path)]) == 0
    for name in FILES.values():
        committed = (PUBLISHED / name).read_text(encoding="utf-8")
        assert (tmp_path / name).read_text(encoding="utf-8") == committed, (
            f"leaderboard/{name} differs from what its records give; regenerate it with "
            "`tokbench leaderboard --records leaderboard/records --format all --out leaderboard`")
    # Plot pixels may differ across matplotlib versions; the set of plots may not.
    plots = sorted(p.name for p in (tmp_path / "plots").iterdir())
    assert sorted(p.name for p in (PUBLISHED / "plots").iterdir()) == plots
