"""The published leaderboard/ folder never drifts from the run records committed with it."""
from __future__ import annotations

import shlex
from pathlib import Path

from tokbench.cli import build_parser
from tokbench.leaderboard.plots import PLOTS_DIR
from tokbench.leaderboard.publish import RECORDS_DIR, plot_plans, published_texts
from tokbench.leaderboard.records import load_sections

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = ROOT / "leaderboard"


def _regenerate_command() -> list[str]:
    """The `tokbench leaderboard ...` line of the published README, as arguments."""
    lines = [line for line in (PUBLISHED / "README.md").read_text(encoding="utf-8").splitlines()
             if line.startswith("tokbench leaderboard ")]
    assert len(lines) == 1, "leaderboard/README.md must name the one command that regenerates it"
    return shlex.split(lines[0])[1:]


def test_published_folder_regenerates_from_its_records(monkeypatch):
    assert (PUBLISHED / RECORDS_DIR).is_dir(), "leaderboard/ must ship the run records it is computed from"
    command = _regenerate_command()
    args = build_parser().parse_args(command)
    assert args.format == "all" and args.out == Path("leaderboard"), command
    monkeypatch.chdir(ROOT)  # the command's paths are relative to the repository root
    sections = load_sections(args.records)
    # The texts `tokbench leaderboard --format all` writes; plots are planned, not drawn (their pixels may differ
    # across matplotlib versions), so the set of plot files is compared instead.
    redo = f"regenerate it with `tokbench {shlex.join(command)}`"
    for name, text in published_texts(sections, args.out).items():
        assert text == (PUBLISHED / name).read_text(encoding="utf-8"), f"leaderboard/{name} has drifted; {redo}"
    expected = sorted(f for plots in plot_plans(sections).values() for plot in plots for f in plot.files)
    assert sorted(p.name for p in (PUBLISHED / PLOTS_DIR).iterdir()) == expected, f"the plots have drifted; {redo}"
