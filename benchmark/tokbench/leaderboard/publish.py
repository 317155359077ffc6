"""Write a leaderboard: one text format, or the whole published folder.

The published folder holds README.md, leaderboard.csv, leaderboard.json,
leaderboard.tex, index.html, plots/ and the run records behind them in
records/, so it regenerates from its own contents.
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the CLI imports this module to build its parser: keep it light
    from tokbench.leaderboard.aggregate import Leaderboard
    from tokbench.leaderboard.document import Image

FILES = {"md": "README.md", "csv": "leaderboard.csv", "json": "leaderboard.json", "html": "index.html",
         "latex": "leaderboard.tex"}
FORMATS = ("terminal", *FILES, "all")
RECORDS_DIR = "records"
# How the published folder is made, from the repository root: the full runs of the two suites, then this command.
REGENERATE = (
    "tokbench run --suite paper --out leaderboard/records",
    "tokbench run --suite default --out leaderboard/records",
    "tokbench leaderboard --records leaderboard/records --format all --out leaderboard",
)


def render(board: Leaderboard, fmt: str, images: Sequence[Image] = (), commands: Sequence[str] = ()) -> str:
    """The leaderboard as text in ``fmt`` (one of ``FILES``)."""
    from tokbench.leaderboard.document import document
    from tokbench.leaderboard.render import to_csv, to_html, to_json, to_latex, to_markdown

    if fmt == "md":
        return to_markdown(document(board, images, commands))
    if fmt == "html":
        return to_html(document(board, images, commands))
    return {"csv": to_csv, "json": to_json, "latex": to_latex}[fmt](board)


def show(board: Leaderboard, console: Any = None) -> None:
    """Print the brief leaderboard (main table, findings, failed runs) on a rich console (default: stdout)."""
    from rich.console import Console

    from tokbench.leaderboard.document import document
    from tokbench.leaderboard.render import to_terminal

    to_terminal(document(board, brief=True), console or Console())


def write_format(board: Leaderboard, fmt: str, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / FILES[fmt]
    path.write_text(render(board, fmt), encoding="utf-8")
    return path


def published_texts(board: Leaderboard, images: Sequence[Image] | None = None) -> dict[str, str]:
    """The text files of the published folder by name, linking the plots that :func:`publish` draws."""
    if images is None:
        from tokbench.leaderboard.plots import plan

        images = [plot.image for plot in plan(board)]
    return {name: render(board, fmt, images, REGENERATE) for fmt, name in FILES.items()}


def publish(board: Leaderboard, records: Sequence[dict[str, Any]], sources: Sequence[Path], out: Path) -> list[Path]:
    """Write the published folder into ``out``: its records, plots and every text format."""
    from tokbench.leaderboard.plots import PLOTS_DIR, plan, write_plots

    out.mkdir(parents=True, exist_ok=True)
    _copy_records(records, sources, out / RECORDS_DIR)
    plots = plan(board)
    write_plots(plots, out)
    for name, text in published_texts(board, [plot.image for plot in plots]).items():
        (out / name).write_text(text, encoding="utf-8")
    return [out / name for name in FILES.values()] + [out / PLOTS_DIR / f for plot in plots for f in plot.files]


def _copy_records(records: Sequence[dict[str, Any]], sources: Sequence[Path], folder: Path) -> None:
    """Make ``folder`` hold exactly ``records`` (unless it is where they were read from)."""
    from tokbench.results import record_filename, write_record

    if folder.resolve() in {s.resolve() for s in sources}:
        return
    names = {record_filename(r["task"], r["model"], r["config_hash"]) for r in records}
    if folder.is_dir():
        for stale in folder.glob("*.json"):
            if stale.name not in names:
                stale.unlink()
    for record in records:
        write_record(folder, record)
