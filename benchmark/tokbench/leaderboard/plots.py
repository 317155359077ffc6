"""Plots of a leaderboard (matplotlib, Agg; no pyplot state): a heatmap, training curves, attention profiles.

Files carry no dates (PNG without the Software tag, SVG with a fixed hash salt and
no Date), so regenerating them from the same records and matplotlib gives the same
bytes; across matplotlib versions the pixels may differ, which is why the drift
test compares the text outputs only.
"""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from tokbench.leaderboard.aggregate import Cell, Column, Leaderboard
from tokbench.leaderboard.document import Image
from tokbench.leaderboard.stats import seed_mean
from tokbench.leaderboard.views import column_header, row_header

PLOTS_DIR = "plots"
_PNG = {"Software": None}
_SVG = {"Date": None, "Creator": None}


def _text(text: str) -> str:
    """A record string as literal matplotlib text (``$`` would start mathtext)."""
    return text.replace("$", r"\$")


def _figure(width: float, height: float) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def _save(fig: Any, folder: Path, stem: str, svg: bool) -> None:
    """Render into memory, then write each file atomically: a full disk never leaves a truncated image."""
    import io

    import matplotlib

    from tokbench.storage import atomic_write

    formats = {"png": _PNG, **({"svg": _SVG} if svg else {})}
    with matplotlib.rc_context({"svg.hashsalt": "tokbench", "svg.fonttype": "none"}):
        for fmt, metadata in formats.items():
            buffer = io.BytesIO()
            fig.savefig(buffer, format=fmt, metadata=metadata)
            atomic_write(folder / f"{stem}.{fmt}", buffer.getvalue())


def heatmap(board: Leaderboard) -> Any:
    """Normalised accuracy (accuracy / Bayes optimum, mean over seeds), models x held-out tasks."""
    columns = board.test_columns
    rows = [r for r in board.rows if any(board.cell(c, r) for c in columns)]
    values = [[(c.metrics["normalized_accuracy"].mean if c and "normalized_accuracy" in c.metrics else math.nan)
               for c in (board.cell(col, row) for col in columns)] for row in rows]
    fig = _figure(2.0 + 1.3 * len(columns), 1.5 + 0.45 * len(rows))
    ax = fig.add_subplot()
    image = ax.imshow(values, vmin=0.0, vmax=1.0, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(columns)), [_text(column_header(c)) for c in columns], rotation=30, ha="right")
    ax.set_yticks(range(len(rows)), [_text(row_header(r)) for r in rows])
    for i, line in enumerate(values):
        for j, value in enumerate(line):
            if not math.isnan(value):
                ax.text(j, i, f"{value:.2f}", ha="center", va="center", color="white" if value < 0.6 else "black",
                        fontsize=8)
    fig.colorbar(image, ax=ax, label="accuracy / Bayes optimum")
    ax.set_title("Accuracy / Bayes-optimal accuracy (mean over seeds)")
    return fig


def _mean_series(series: Sequence[Sequence[float | None]]) -> list[float]:
    """Pointwise mean over seeds; a missing (non-finite) value is left out of its point."""
    return [seed_mean(points) for points in zip(*series)]


def mean_curve(cell: Cell) -> dict[str, list[float]] | None:
    """The training curve averaged over the seeds that logged the same steps (the most common step list)."""
    curves = [r["curve"] for r in cell.ok if (r.get("curve") or {}).get("step")]
    if not curves:
        return None
    steps, _ = Counter(tuple(c["step"]) for c in curves).most_common(1)[0]
    same = [c for c in curves if tuple(c["step"]) == steps]
    return {"step": list(steps), **{key: _mean_series([c[key] for c in same]) for key in ("loss", "accuracy")}}


def _colors(n: int) -> list[Any]:
    """``n`` distinct colours: tab10 up to ten lines, tab20 up to twenty, then evenly spaced."""
    import matplotlib

    if n <= 10:
        return [matplotlib.colormaps["tab10"](i) for i in range(n)]
    if n <= 20:
        return [matplotlib.colormaps["tab20"](i) for i in range(n)]
    return [matplotlib.colormaps["turbo"](i / (n - 1)) for i in range(n)]


def curve_lines(board: Leaderboard, column: Column) -> list[tuple[str, dict[str, list[float]]]]:
    """(model label, mean curve) of each model with a training curve on ``column``."""
    return [(cell.row.label, curve) for cell in board.column_cells(column) if (curve := mean_curve(cell))]


def curves(column: Column, lines: list[tuple[str, dict[str, list[float]]]]) -> Any:
    """Training loss and accuracy against steps on one task, one line per model."""
    fig = _figure(13, 4)
    loss_ax, acc_ax = fig.subplots(1, 2)
    colors = _colors(len(lines))
    for ax in (loss_ax, acc_ax):
        ax.set_prop_cycle(color=colors)
    for label, curve in lines:
        loss_ax.plot(curve["step"], curve["loss"], label=_text(label))
        acc_ax.plot(curve["step"], curve["accuracy"], label=_text(label))
    if column.bayes is not None:
        acc_ax.axhline(column.bayes.mean, color="grey", linestyle="--", label="bayes-optimal")
    for ax, name in ((loss_ax, "training loss"), (acc_ax, "training accuracy")):
        ax.set_xlabel("step")
        ax.set_ylabel(name)
    fig.legend(*acc_ax.get_legend_handles_labels(), loc="outside right center", fontsize=7)
    fig.suptitle(_text(f"{column_header(column)}: training curves (mean over seeds)"))
    return fig


def mean_profile(cell: Cell) -> list[float] | None:
    """The query's attention per input position, averaged over seeds."""
    profiles = [r["attention_profile"] for r in cell.ok if r.get("attention_profile")]
    if not profiles:
        return None
    length, _ = Counter(len(p) for p in profiles).most_common(1)[0]
    return _mean_series([p for p in profiles if len(p) == length])


def profile_panels(board: Leaderboard, column: Column) -> list[tuple[str, list[float]]]:
    """(model label, mean attention profile) of each model with attention on ``column``."""
    return [(cell.row.label, profile) for cell in board.column_cells(column) if (profile := mean_profile(cell))]


def attention(column: Column, panels: list[tuple[str, list[float]]]) -> Any:
    """One panel per model: the query's mean attention over the input positions on the eval split."""
    ncols = min(3, len(panels))
    nrows = math.ceil(len(panels) / ncols)
    fig = _figure(4 * ncols, 2.6 * nrows)
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for ax, (label, profile) in zip(axes, panels):
        ax.plot(range(1, len(profile) + 1), profile, marker=".", markersize=3, linewidth=1)
        ax.axhline(1 / len(profile), color="grey", linestyle="--", linewidth=0.8, label="uniform")
        ax.set_ylim(bottom=0)
        ax.set_title(_text(label), fontsize=9)
        ax.set_xlabel("input position")
        ax.set_ylabel("mean attention")
    axes[0].legend(fontsize=7, loc="upper left")
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    fig.suptitle(_text(f"{column_header(column)}: the query's mean attention over positions "
                       f"({column.eval_split} split)"))
    return fig


@dataclass(frozen=True)
class Plot:
    """One planned plot: its place in the document, and how to draw it."""

    image: Image
    draw: Callable[[], Any]
    svg: bool = False

    @property
    def files(self) -> list[str]:
        """Its file names in the plots folder."""
        stem = Path(self.image.path).stem
        return [f"{stem}.png", *([f"{stem}.svg"] if self.svg else [])]


def plan(board: Leaderboard, prefix: str = "") -> list[Plot]:
    """Every plot the records allow: the heatmap, then per task the curves and the attention profiles.

    File names start with ``prefix`` (a section's). Planning draws nothing and imports no
    matplotlib, so the documents that link the plots can be rendered (and checked) without
    drawing them.
    """
    def image(caption: str, stem: str) -> Image:
        return Image(caption, f"{PLOTS_DIR}/{prefix}{stem}.png")

    plots = ([Plot(image("Normalised accuracy, models x tasks", "heatmap"), partial(heatmap, board), svg=True)]
             if board.test_columns else [])
    for column in board.columns:
        name = column_header(column)
        if lines := curve_lines(board, column):
            plots.append(Plot(image(f"{name}: training curves", f"curves-{column.slug}"),
                              partial(curves, column, lines)))
        if panels := profile_panels(board, column):
            plots.append(Plot(image(f"{name}: mean attention over positions", f"attention-{column.slug}"),
                              partial(attention, column, panels)))
    return plots


def write_plots(plots: list[Plot], out: Path) -> None:
    """Draw ``plots`` into ``out/plots``, replacing files of the same name and leaving the others."""
    for plot in plots:
        _save(plot.draw(), out / PLOTS_DIR, Path(plot.image.path).stem, plot.svg)


def remove_stale_plots(plots: list[Plot], out: Path) -> None:
    """Remove the image files in ``out/plots`` that are none of ``plots``' files."""
    keep = {f for plot in plots for f in plot.files}
    for old in [*(out / PLOTS_DIR).glob("*.png"), *(out / PLOTS_DIR).glob("*.svg")]:
        if old.name not in keep:
            old.unlink()
