"""Plots of a leaderboard (matplotlib, Agg; no pyplot state): a heatmap, training curves, attention profiles.

Files carry no dates (PNG without the Software tag, SVG with a fixed hash salt and
no Date), so regenerating them from the same records and matplotlib gives the same
bytes; across matplotlib versions the pixels may differ, which is why the drift
test compares the text outputs only.
"""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tokbench.leaderboard.aggregate import Cell, Column, Leaderboard
from tokbench.leaderboard.document import Image
from tokbench.leaderboard.views import column_header

PLOTS_DIR = "plots"
_PNG = {"Software": None}
_SVG = {"Date": None, "Creator": None}


def _text(text: str) -> str:
    """A record string as literal matplotlib text (``$`` would start mathtext)."""
    return text.replace("$", r"\$")


def _figure(width: float, height: float) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def _save(fig: Any, folder: Path, stem: str, svg: bool = False) -> str:
    import matplotlib

    with matplotlib.rc_context({"svg.hashsalt": "tokbench", "svg.fonttype": "none"}):
        fig.savefig(folder / f"{stem}.png", metadata=_PNG)
        if svg:
            fig.savefig(folder / f"{stem}.svg", metadata=_SVG)
    return f"{PLOTS_DIR}/{stem}.png"


def heatmap(board: Leaderboard) -> Any:
    """Normalised accuracy (accuracy / Bayes optimum, mean over seeds), models x tasks."""
    values = [[(c.metrics["normalized_accuracy"].mean if c and "normalized_accuracy" in c.metrics else math.nan)
               for c in (board.cell(col, row) for col in board.columns)] for row in board.rows]
    fig = _figure(2.0 + 1.3 * len(board.columns), 1.5 + 0.45 * len(board.rows))
    ax = fig.add_subplot()
    image = ax.imshow(values, vmin=0.0, vmax=1.0, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(board.columns)), [_text(column_header(c)) for c in board.columns], rotation=30, ha="right")
    ax.set_yticks(range(len(board.rows)), [_text(r.label) for r in board.rows])
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
    means = []
    for points in zip(*series):
        finite = [p for p in points if p is not None]
        means.append(math.fsum(finite) / len(finite) if finite else math.nan)
    return means


def mean_curve(cell: Cell) -> dict[str, list[float]] | None:
    """The training curve averaged over the seeds that logged the same steps (the most common step list)."""
    curves = [r["curve"] for r in cell.ok if (r.get("curve") or {}).get("step")]
    if not curves:
        return None
    steps, _ = Counter(tuple(c["step"]) for c in curves).most_common(1)[0]
    same = [c for c in curves if tuple(c["step"]) == steps]
    return {"step": list(steps), **{key: _mean_series([c[key] for c in same]) for key in ("loss", "accuracy")}}


def curves(board: Leaderboard, column: Column) -> Any | None:
    """Training loss and accuracy against steps on one task, one line per model."""
    lines = [(cell.row.label, curve) for cell in board.column_cells(column) if (curve := mean_curve(cell))]
    if not lines:
        return None
    fig = _figure(11, 4)
    loss_ax, acc_ax = fig.subplots(1, 2)
    for label, curve in lines:
        loss_ax.plot(curve["step"], curve["loss"], label=_text(label))
        acc_ax.plot(curve["step"], curve["accuracy"], label=_text(label))
    if column.bayes is not None:
        acc_ax.axhline(column.bayes.mean, color="grey", linestyle="--", label="bayes-optimal")
    for ax, name in ((loss_ax, "training loss"), (acc_ax, "training accuracy")):
        ax.set_xlabel("step")
        ax.set_ylabel(name)
    acc_ax.legend(fontsize=7, loc="best")
    fig.suptitle(_text(f"{column_header(column)}: training curves (mean over seeds)"))
    return fig


def mean_profile(cell: Cell) -> list[float] | None:
    """The query's attention per input position, averaged over seeds."""
    profiles = [r["attention_profile"] for r in cell.ok if r.get("attention_profile")]
    if not profiles:
        return None
    length, _ = Counter(len(p) for p in profiles).most_common(1)[0]
    return _mean_series([p for p in profiles if len(p) == length])


def attention(board: Leaderboard, column: Column) -> Any | None:
    """One panel per model: the query's mean attention over the input positions on the eval split."""
    panels = [(cell.row.label, profile) for cell in board.column_cells(column) if (profile := mean_profile(cell))]
    if not panels:
        return None
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


def write_plots(board: Leaderboard, out: Path) -> list[Image]:
    """Write every plot into ``out/plots`` (stale plot files there are removed); return them as document images."""
    folder = out / PLOTS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    for old in [*folder.glob("*.png"), *folder.glob("*.svg")]:
        old.unlink()
    images = [Image("Normalised accuracy, models x tasks", _save(heatmap(board), folder, "heatmap", svg=True))]
    for column in board.columns:
        for kind, make, caption in (("curves", curves, "training curves"),
                                    ("attention", attention, "mean attention over positions")):
            fig = make(board, column)
            if fig is not None:
                images.append(Image(f"{column_header(column)}: {caption}", _save(fig, folder, f"{kind}-{column.slug}")))
    return images
