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
from tokbench.leaderboard.report import Report
from tokbench.leaderboard.scale import CHANCE_SCALE, FINAL
from tokbench.leaderboard.scores import Ladder, Scores, rung_cell, rung_stat
from tokbench.leaderboard.stats import Stat, seed_mean
from tokbench.leaderboard.views import column_header, row_header

LEGEND_SIZE = 10  # points: the body text of a page, so a legend reads as easily as the text around it
MARKERS = "osD^vP*Xph"  # one per line of a panel, so lines that overlap stay distinguishable
AT_OPTIMUM = 0.99  # a panel whose every mean is at least this says so in words (a threshold, not a test)

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
    """Each cell's mean score (on its scale: chance 0 and oracle 1, or accuracy / Bayes optimum for older
    records), models x held-out tasks."""
    columns = board.test_columns
    rows = [r for r in board.rows if any(board.cell(c, r) for c in columns)]
    values = [[(stat.mean if (stat := rung_stat(board.cell(col, row))) is not None else math.nan)
               for col in columns] for row in rows]
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
    fig.colorbar(image, ax=ax, label="score (1 = optimum)")
    ax.set_title("Score per task configuration (mean over seeds)")
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
        acc_ax.legend(fontsize=LEGEND_SIZE, loc="best")
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
    axes[0].legend(fontsize=LEGEND_SIZE, loc="upper left")
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
    markers = dict(zip(names, MARKERS * (len(names) // len(MARKERS) + 1)))
    for ax, (ladder, lines) in zip(axes, panels):
        colors = _colors(len(lines))
        for index, (name, (label, stats)) in enumerate(lines):
            means = [s.mean if s else math.nan for s in stats]
            errors = [[s.mean - s.low if s and s.interval else 0.0 for s in stats],
                      [s.high - s.mean if s and s.interval else 0.0 for s in stats]]
            ax.errorbar(range(len(stats)), means, yerr=errors, marker=markers[name], markersize=5,
                        linewidth=1, capsize=2, fillstyle="none", color=palette[name] if palette else colors[index],
                        label=_text(name if palette else label))
        _say_if_all_high(ax, [s.mean for _, (_, stats) in lines for s in stats if s is not None])
        ax.axhline(1.0, color="grey", linestyle="--", linewidth=0.8, label="optimum")
        ax.set_ylim(0, max(1.05, 1.02 * top))  # one scale for every panel
        ax.set_xticks(range(len(ladder.rungs)), [_text(r.label) for r in ladder.rungs])
        ax.set_xlabel(_text(" / ".join(ladder.axes)))
        ax.set_ylabel(_scale_label(scores))
        ax.tick_params(labelleft=True)
        ax.set_title(_title(ladder.title), fontsize=LEGEND_SIZE)
        if not palette:  # colours differ per panel: each panel names its own lines
            ax.legend(fontsize=LEGEND_SIZE, loc="best")
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    if palette:
        _shared_legend(fig, axes)
    fig.suptitle("Ladders: mean score per rung (easiest first), the best member of each model family")
    return fig


def _shared_legend(fig: Any, axes: Any) -> None:
    """One legend under every panel, at body-text size: the lines keep their colour and marker across panels, and
    no legend covers a line."""
    entries: dict[str, Any] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            entries.setdefault(label, handle)
    fig.legend(list(entries.values()), list(entries), loc="outside lower center", fontsize=LEGEND_SIZE,
               ncols=min(4, len(entries)), frameon=False)


def _scale_label(scores: Scores) -> str:
    return "score (chance 0, optimum 1)" if scores.scales == [CHANCE_SCALE] else "score (accuracy / optimum)"


def all_high_text() -> str:
    """What a panel whose every mean is at least :data:`AT_OPTIMUM` says: the threshold, no claim of optimality (no
    test stands behind it)."""
    return f"every mean ≥ {AT_OPTIMUM:g}"


def _say_if_all_high(ax: Any, means: list[float]) -> None:
    """Say so in a panel whose lines all sit at the top (every mean at least :data:`AT_OPTIMUM`), where they hide
    one another."""
    if means and min(means) >= AT_OPTIMUM:
        ax.text(0.5, 0.5, all_high_text(), transform=ax.transAxes, ha="center", va="center",
                fontsize=LEGEND_SIZE, color="grey")


def budget_lines(report: Report, ladder: str) -> list[tuple[str, list[float]]]:
    """Per model family, its learned member's mean score on ``ladder`` at each budget (NaN where it has none): the
    member with the highest final score."""
    budgets = report.budgets
    assert budgets is not None
    final = budgets.tables[FINAL]
    best: dict[str, tuple[float, Row]] = {}
    for row in final.ranked:
        stat = final.score(ladder, row).stat
        name = final.family[row.key]
        if stat is not None and (name not in best or stat.mean > best[name][0]):
            best[name] = (stat.mean, row)
    ranked = sorted(best.items(), key=lambda item: -item[1][0])[:LINES_PER_PANEL]
    return [(name, [s.stat.mean if (s := table.score(ladder, row)).stat else math.nan
                    for table in budgets.tables.values()]) for name, (_, row) in ranked]


def budget_curves(report: Report) -> Any:
    """Small multiples, one panel per family: score against training steps (log scale), one line per model family
    (its best member), the final step drawn at the budget after the last (runs stop at different steps)."""
    budgets, scores = report.budgets, report.scores
    assert budgets is not None and scores is not None
    labels = budgets.labels
    steps = [int(label) for label in labels if label != FINAL]
    xs = [*steps, steps[-1] * 3 if steps else 1]
    panels = [(ladder, budget_lines(report, ladder.task)) for ladder in scores.ladders]
    ncols = min(PANEL_COLUMNS, len(panels))
    nrows = math.ceil(len(panels) / ncols)
    fig = _figure(4.8 * ncols, 3.8 * nrows)
    axes = fig.subplots(nrows, ncols, squeeze=False, sharey=True).ravel()
    names = sorted({name for _, lines in panels for name, _ in lines})
    palette = dict(zip(names, _colors(len(names)))) if len(names) <= LINES_PER_PANEL else {}
    markers = dict(zip(names, MARKERS * (len(names) // len(MARKERS) + 1)))
    for ax, (ladder, lines) in zip(axes, panels):
        for name, means in lines:
            ax.plot(xs, means, marker=markers[name], fillstyle="none", linewidth=1, color=palette.get(name),
                    label=_text(name))
        _say_if_all_high(ax, [m for _, means in lines for m in means if not math.isnan(m)])
        ax.axhline(1.0, color="grey", linestyle="--", linewidth=0.8, label="optimum")
        ax.set_xscale("log")
        ax.set_xticks(xs, [*(f"{s:,}" for s in steps), "final"])
        ax.minorticks_off()
        ax.set_xlabel("training steps")
        ax.set_ylabel(_scale_label(scores))
        ax.tick_params(labelleft=True)
        ax.set_title(_title(ladder.title), fontsize=LEGEND_SIZE)
    return _finish_grid(fig, axes, len(panels), bool(palette),
                        "Score against training budget, the best member of each model family")


def length_lines(report: Report, ladder: Ladder) -> list[tuple[str, list[float]]]:
    """Per learned model (each attention model is one positional encoding) with an evaluation on ``ladder``: its
    mean accuracy at the training length and at each setting (NaN where n/a)."""
    from tokbench.leaderboard.lengths import ladder_mean

    lengths, scores = report.lengths, report.scores
    assert lengths is not None and scores is not None
    lines: dict[str, list[float]] = {}
    for row in scores.ranked:
        points = [ladder_mean(report.board, ladder, row, name, "accuracy") for name in (None, *lengths.settings)]
        if any(p is not None for p in points[1:]) and row.model not in lines:
            lines[row.model] = [math.nan if p is None else p for p in points]
    return list(lines.items())[:LINES_PER_PANEL]


def length_curves(report: Report) -> Any:
    """One panel per family: test accuracy against evaluation length (training length first), one line per model;
    a model that cannot run at a longer length has no point there."""
    lengths, scores = report.lengths, report.scores
    assert lengths is not None and scores is not None
    panels = [(ladder, lines) for ladder in scores.ladders if (lines := length_lines(report, ladder))]
    ncols = max(1, min(PANEL_COLUMNS, len(panels)))
    nrows = max(1, math.ceil(len(panels) / ncols))
    fig = _figure(4.8 * ncols, 3.8 * nrows)
    axes = fig.subplots(nrows, ncols, squeeze=False, sharey=True).ravel()
    ticks = ["trained", *lengths.settings]
    names = sorted({name for _, lines in panels for name, _ in lines})
    palette = dict(zip(names, _colors(len(names)))) if len(names) <= LINES_PER_PANEL else {}
    markers = dict(zip(names, MARKERS * (len(names) // len(MARKERS) + 1)))
    for ax, (ladder, lines) in zip(axes, panels):
        for name, means in lines:
            ax.plot(range(len(ticks)), means, marker=markers[name], fillstyle="none", linewidth=1,
                    color=palette.get(name), label=_text(name))
        ax.set_xticks(range(len(ticks)), [_text(t) for t in ticks])
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel("evaluation length")
        ax.set_ylabel("test accuracy")
        ax.tick_params(labelleft=True)
        ax.set_title(_title(ladder.title), fontsize=LEGEND_SIZE)
    return _finish_grid(fig, axes, len(panels), bool(palette),
                        "Length generalisation: accuracy against evaluation length, one line per model")


def _finish_grid(fig: Any, axes: Any, used: int, shared: bool, title: str) -> Any:
    """Hide the unused panels and give the legend: one shared legend under the panels at body-text size when every
    line keeps one colour across panels, else each panel's own."""
    for ax in axes[:used] if not shared else ():
        ax.legend(fontsize=LEGEND_SIZE, loc="best")
    for ax in axes[used:]:
        ax.set_visible(False)
    if shared:
        _shared_legend(fig, axes)
    fig.suptitle(title)
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


def plan(report: Report, prefix: str = "") -> list[Plot]:
    """Every plot the report allows: the ladders (the key plot, also as SVG), the budget curves, the length
    curves, the heatmap, then per task the curves and the attention profiles.

    File names start with ``prefix`` (a section's). Planning draws nothing and imports no
    matplotlib, so the documents that link the plots can be rendered (and checked) without
    drawing them.
    """
    board = report.board

    def image(caption: str, stem: str, leads: bool = False, svg: bool = False) -> Image:
        path = f"{PLOTS_DIR}/{prefix}{stem}"
        return Image(caption, f"{path}.png", leads, f"{path}.svg" if svg else "")

    plots: list[Plot] = []
    if (scores := report.scores) is not None:
        plots.append(Plot(image("Ladders: mean score per rung, one line per model family", "ladders", leads=True,
                                svg=True), partial(ladders, board, scores), svg=True))
        if report.budgets is not None:
            plots.append(Plot(image("Score against training steps per family, one line per model family", "budgets",
                                    leads=True), partial(budget_curves, report)))
        if report.lengths is not None:
            plots.append(Plot(image("Accuracy against evaluation length, one line per model (positional encoding)",
                                    "lengths", leads=True), partial(length_curves, report)))
    if board.test_columns:
        plots.append(Plot(image("Score, models x tasks", "heatmap"), partial(heatmap, board), svg=True))
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
