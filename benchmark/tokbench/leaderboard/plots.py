"""Plots of a leaderboard (matplotlib, Agg; no pyplot state): ladders, a heatmap, training curves, attention profiles.

Files carry no dates (PNG without the Software tag, SVG with a fixed hash salt and
no Date), so regenerating them from the same records and matplotlib gives the same
bytes; across matplotlib versions the pixels may differ, which is why the drift
test compares the text outputs only.
"""
from __future__ import annotations

import math
import textwrap
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from tokbench.leaderboard.aggregate import Cell, Column, Leaderboard, Row
from tokbench.leaderboard.document import Image
from tokbench.leaderboard.scores import Ladder, Scores, build_scores, rung_cell, rung_stat
from tokbench.leaderboard.stats import Stat, seed_mean
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


LINES_PER_PANEL = 10  # the qualitative tab10 palette: more lines per panel could not be told apart
PANEL_COLUMNS = 3


def _colors(n: int) -> list[Any]:
    """``n`` <= ``LINES_PER_PANEL`` colours of the qualitative tab10 palette."""
    import matplotlib

    return [matplotlib.colormaps["tab10"](i) for i in range(n)]


def _title(text: str, width: int = 42) -> str:
    """A panel title wrapped onto as many lines as it needs: never cut off."""
    return "\n".join(textwrap.wrap(_text(text), width, break_on_hyphens=False)) or " "


Line = tuple[Row, dict[str, list[float]]]


def curve_lines(board: Leaderboard, column: Column) -> list[Line]:
    """(row, mean curve) of each model with a training curve on ``column`` (models that train)."""
    return [(cell.row, curve) for cell in board.column_cells(column) if (curve := mean_curve(cell))
            and len(curve["step"]) > 1]


def curve_panels(lines: list[Line]) -> list[tuple[str, list[Line]]]:
    """Small multiples: one panel per model (its variants as lines), at most ``LINES_PER_PANEL`` lines each.

    A model's variants share one loss, so each panel's loss axis holds a single loss.
    """
    by_model: dict[str, list[Line]] = {}
    for line in lines:
        by_model.setdefault(line[0].model, []).append(line)
    panels = []
    for model, group in by_model.items():
        chunks = [group[i:i + LINES_PER_PANEL] for i in range(0, len(group), LINES_PER_PANEL)]
        panels += [(model if len(chunks) == 1 else f"{model} ({n + 1}/{len(chunks)})", chunk)
                   for n, chunk in enumerate(chunks)]
    return panels


def curves(column: Column, lines: list[Line]) -> Any:
    """Per model, training accuracy (shared scale) above training loss (its own), against steps on a log scale."""
    panels = curve_panels(lines)
    ncols = min(PANEL_COLUMNS, len(panels))
    nrows = math.ceil(len(panels) / ncols)
    fig = _figure(5.2 * ncols, 5.4 * nrows)
    axes = fig.subplots(2 * nrows, ncols, squeeze=False, sharex=True)
    for index, (title, members) in enumerate(panels):
        acc_ax, loss_ax = axes[2 * (index // ncols), index % ncols], axes[2 * (index // ncols) + 1, index % ncols]
        for ax in (acc_ax, loss_ax):
            ax.set_prop_cycle(color=_colors(len(members)))
            ax.set_xscale("symlog", linthresh=1)  # log steps; step 0 stays on the axis
        for row, curve in members:
            label = _text(row.label.removeprefix(row.model).strip() or "defaults")
            acc_ax.plot(curve["step"], curve["accuracy"], label=label)
            loss_ax.plot(curve["step"], curve["loss"], label=label)
        if column.bayes is not None:
            acc_ax.axhline(column.bayes.mean, color="grey", linestyle="--", linewidth=0.8, label="Bayes optimum")
        acc_ax.set_ylim(-0.02, 1.02)
        acc_ax.set_title(_title(title), fontsize=9)
        acc_ax.set_ylabel("training accuracy")
        loss_ax.set_ylabel("training loss (its own)")
        loss_ax.set_xlabel("step (log scale)")
        for ax in (acc_ax, loss_ax):
            ax.tick_params(labelbottom=True)  # every panel keeps its step axis
        acc_ax.legend(fontsize=6, loc="best")
    for index in range(len(panels), nrows * ncols):
        for row in (2 * (index // ncols), 2 * (index // ncols) + 1):
            axes[row, index % ncols].set_visible(False)
    fig.suptitle(_title(f"{column_header(column)}: training curves, mean over seeds", 90))
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
    return [(row_header(cell.row), profile) for cell in board.column_cells(column) if (profile := mean_profile(cell))]


def attention(column: Column, panels: list[tuple[str, list[float]]]) -> Any:
    """One panel per model, on one shared scale: the query's mean attention over the input positions."""
    from matplotlib.ticker import MaxNLocator

    ncols = min(PANEL_COLUMNS, len(panels))
    nrows = math.ceil(len(panels) / ncols)
    fig = _figure(4.4 * ncols, 2.9 * nrows)
    axes = fig.subplots(nrows, ncols, squeeze=False, sharex=True, sharey=True).ravel()
    top = max((v for _, profile in panels for v in profile if v is not None and math.isfinite(v)), default=1.0)
    for ax, (label, profile) in zip(axes, panels):
        ax.plot(range(1, len(profile) + 1), profile, marker=".", markersize=3, linewidth=1)
        ax.axhline(1 / len(profile), color="grey", linestyle="--", linewidth=0.8, label="uniform")
        ax.set_ylim(0, 1.05 * top)  # one scale for every panel, set by the highest peak
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # positions are whole numbers
        ax.tick_params(labelbottom=True)
        ax.set_title(_title(label), fontsize=8)
        ax.set_xlabel("input position")
        ax.set_ylabel("mean attention")
    axes[0].legend(fontsize=7, loc="upper left")
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    fig.suptitle(_title(f"{column_header(column)}: the query's mean attention over positions "
                        f"({column.eval_split} split)", 90))
    return fig


LadderLine = tuple[str, list[Stat | None]]  # legend label, one statistic per rung (None: no value)


def ladder_lines(board: Leaderboard, scores: Scores, ladder: Ladder) -> list[tuple[str, LadderLine]]:
    """Per model family, its learned member with the highest score on ``ladder``: (family, (label, rung stats)).

    A member without a score (a rung missing) ranks below those with one, by the mean of the
    rungs it has. At most ``LINES_PER_PANEL`` families, the highest first. Oracles are left
    out: they sit on the optimum by construction.
    """
    best: dict[str, tuple[tuple[bool, float], Row, list[Stat | None]]] = {}
    for row in scores.rows:
        if row.oracle:
            continue
        stats = [rung_stat(rung_cell(board, rung, row)) for rung in ladder.rungs]
        present = [s.mean for s in stats if s is not None]
        if not present:
            continue
        score = scores.score(ladder.task, row).stat
        rank = (score is not None, score.mean if score else math.fsum(present) / len(present))
        name = scores.family[row.key]
        if name not in best or rank > best[name][0]:
            best[name] = (rank, row, stats)
    ranked = sorted(best.items(), key=lambda item: item[1][0], reverse=True)[:LINES_PER_PANEL]
    return [(name, (row.label if name == row.label else f"{name}: {row.label}", stats))
            for name, (_, row, stats) in ranked]


def ladders(board: Leaderboard, scores: Scores) -> Any:
    """Small multiples, one panel per ladder on one shared y scale: mean normalised accuracy per rung, one line
    per model family, error bars the cells' intervals, the Bayes optimum dashed at 1."""
    panels = [(ladder, ladder_lines(board, scores, ladder)) for ladder in scores.ladders]
    names = sorted({name for _, lines in panels for name, _ in lines})
    palette = dict(zip(names, _colors(len(names)))) if len(names) <= LINES_PER_PANEL else None
    ncols = min(PANEL_COLUMNS, len(panels))
    nrows = math.ceil(len(panels) / ncols)
    fig = _figure(4.8 * ncols, 3.6 * nrows)
    axes = fig.subplots(nrows, ncols, squeeze=False, sharey=True).ravel()
    top = max((s.high if s.high is not None else s.mean for _, lines in panels for _, (_, stats) in lines
               for s in stats if s is not None), default=1.0)
    for ax, (ladder, lines) in zip(axes, panels):
        colors = _colors(len(lines))
        for index, (name, (label, stats)) in enumerate(lines):
            means = [s.mean if s else math.nan for s in stats]
            errors = [[s.mean - s.low if s and s.interval else 0.0 for s in stats],
                      [s.high - s.mean if s and s.interval else 0.0 for s in stats]]
            ax.errorbar(range(len(stats)), means, yerr=errors, marker="o", markersize=3, linewidth=1, capsize=2,
                        color=palette[name] if palette else colors[index], label=_text(label))
        ax.axhline(1.0, color="grey", linestyle="--", linewidth=0.8, label="Bayes optimum")
        ax.set_ylim(0, max(1.05, 1.02 * top))  # one scale for every panel
        ax.set_xticks(range(len(ladder.rungs)), [_text(r.label) for r in ladder.rungs])
        ax.set_xlabel(_text(" / ".join(ladder.axes)))
        ax.set_ylabel("accuracy / Bayes optimum")
        ax.tick_params(labelleft=True)
        ax.set_title(_title(ladder.title), fontsize=9)
        ax.legend(fontsize=6, loc="best")
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    fig.suptitle("Ladders: mean normalised accuracy per rung (easiest first), the best member of each model family")
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
    """Every plot the records allow: the ladders, the heatmap, then per task the curves and the attention profiles.

    File names start with ``prefix`` (a section's). Planning draws nothing and imports no
    matplotlib, so the documents that link the plots can be rendered (and checked) without
    drawing them.
    """
    def image(caption: str, stem: str, leads: bool = False) -> Image:
        return Image(caption, f"{PLOTS_DIR}/{prefix}{stem}.png", leads)

    plots: list[Plot] = []
    if (scores := build_scores(board)) is not None:
        plots.append(Plot(image("Ladders: mean normalised accuracy per rung, one line per model family", "ladders",
                                leads=True), partial(ladders, board, scores)))
    if board.test_columns:
        plots.append(Plot(image("Normalised accuracy, models x tasks", "heatmap"), partial(heatmap, board), svg=True))
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
