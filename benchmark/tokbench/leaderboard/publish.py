"""Write a leaderboard: one text format, or the whole published folder.

The published folder holds README.md (with its detail tables in details.md),
leaderboard.csv, leaderboard.json, leaderboard.tex, index.html, plots/ and the
run records behind them in records/, so it regenerates from its own contents.

Publishing only adds or replaces the files it writes, each atomically. Files it
did not write (records of sections not published this time, plots of an older
layout) stay unless ``prune`` asks to remove them, and even then only records in
the published sections' own folders are removed.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the CLI imports this module to build its parser: keep it light
    from tokbench.leaderboard.aggregate import Section
    from tokbench.leaderboard.document import Image
    from tokbench.leaderboard.plots import Plot
    from tokbench.leaderboard.report import Report

FILES = {"md": "README.md", "csv": "leaderboard.csv", "json": "leaderboard.json", "html": "index.html",
         "latex": "leaderboard.tex"}
FORMATS = ("terminal", *FILES, "all")
RECORDS_DIR = "records"
DETAILS_FILE = "details.md"  # the published README links its per-task detail tables here, to stay short


def render(sections: Sequence[Section], fmt: str, images: Mapping[str, Sequence[Image]] | None = None,
           commands: Sequence[str] = (), details: str | None = None,
           reports: Sequence[Report] | None = None) -> str:
    """The leaderboard as text in ``fmt`` (one of ``FILES``); Markdown links ``details`` for its detail tables.

    ``reports`` are the sections' reports when the caller has built them already (one build per publish).
    """
    from tokbench.leaderboard.document import document
    from tokbench.leaderboard.render import to_csv, to_html, to_json, to_latex, to_markdown
    from tokbench.leaderboard.report import build_reports

    reports = build_reports(sections) if reports is None else reports
    if fmt == "md":
        return to_markdown(document(reports, images, commands, details=details))
    if fmt == "html":
        return to_html(document(reports, images, commands))
    return {"csv": to_csv, "json": to_json, "latex": to_latex}[fmt](reports)


def show(sections: Sequence[Section], console: Any = None) -> None:
    """Print the brief leaderboard (main table, findings, failed runs) on a rich console (default: stdout)."""
    from tokbench.leaderboard.document import document
    from tokbench.leaderboard.render import to_terminal
    from tokbench.leaderboard.report import build_reports

    from tokbench.commands import output_console

    to_terminal(document(build_reports(sections), brief=True), console or output_console())


def write_format(sections: Sequence[Section], fmt: str, out: Path) -> Path:
    from tokbench.storage import atomic_write

    return atomic_write(out / FILES[fmt], render(sections, fmt))


def records_folder(section: Section, out: Path) -> Path:
    """Where the published folder keeps a section's records: ``records/`` or ``records/<name>/``."""
    return out / RECORDS_DIR / section.name if section.name else out / RECORDS_DIR


def regenerate_commands(sections: Sequence[Section], out: Path) -> list[str]:
    """The commands that remake the published folder ``out`` from the repository root.

    By the published folder's convention, a named section holds the full run of the suite
    of that name; a name that is no built-in suite comes from a suite file of a plugin,
    which the records do not name, so its line says what to do instead of guessing a command.
    """
    from tokbench.suites import builtin_suites

    runs, options = [], []
    for section in sections:
        folder = records_folder(section, out).as_posix()
        if section.name:
            runs.append(f"tokbench run --suite {section.name}{_adaptive_flags(section)} --out {folder}"
                        if section.name in builtin_suites() else
                        f"# {section.name}: not a built-in suite: install the plugins it needs (pip install -e DIR), "
                        f"then tokbench run --suite THEIR_SUITE.toml --out {folder}")
            options.append(f"--records {section.name}={folder}")
        else:
            options.append(f"--records {folder}")
    first = "# first install every plugin that provides a task or model the records name (see tokbench plugins)"
    return [first, *runs, f"tokbench leaderboard {' '.join(options)} --format all --out {out.as_posix()}"]


def _adaptive_flags(section: Section) -> str:
    """`` --target-ci X --max-seeds N`` when the section's records were made with that adaptive target."""
    targets = {(note["target_ci"], note["max_seeds"]) for r in section.records if (note := r.get("adaptive"))}
    if len(targets) != 1:
        return ""
    (half_width, cap), = targets
    return f" --target-ci {half_width:g} --max-seeds {cap}"


def plot_plans(sections: Sequence[Section], reports: Sequence[Report] | None = None) -> dict[str, list[Plot]]:
    """Each section's plots, their files prefixed by the section's name when there are several."""
    from tokbench.leaderboard.plots import plan
    from tokbench.leaderboard.report import build_reports

    reports = build_reports(sections) if reports is None else reports
    return {r.name: plan(r, f"{r.section.slug}-" if r.name else "") for r in reports}


def published_texts(sections: Sequence[Section], out: Path, reports: Sequence[Report] | None = None
                    ) -> dict[str, str]:
    """The text files of the published folder ``out`` by name, linking the plots that :func:`publish` draws."""
    from tokbench.leaderboard.document import details_document
    from tokbench.leaderboard.render import to_markdown
    from tokbench.leaderboard.report import build_reports

    reports = build_reports(sections) if reports is None else reports
    images = {name: [plot.image for plot in plots] for name, plots in plot_plans(sections, reports).items()}
    commands = regenerate_commands(sections, out)
    texts = {name: render(sections, fmt, images, commands, DETAILS_FILE, reports) for fmt, name in FILES.items()}
    return {**texts, DETAILS_FILE: to_markdown(details_document(reports, images))}


def publish(sections: Sequence[Section], out: Path, prune: bool = False) -> list[Path]:
    """Write the published folder into ``out``: its records, plots and every text format.

    With ``prune``, also remove what this publish did not write: plots, and records in the
    published sections' own record folders (never another section's, never a source folder's).
    """
    from tokbench.leaderboard.plots import PLOTS_DIR, remove_stale_plots, write_plots
    from tokbench.storage import atomic_write

    from tokbench.leaderboard.report import build_reports

    reports = build_reports(sections)  # computed once: every text and plot below only renders it
    expected = _copy_records(sections, out)
    plots = [plot for section_plots in plot_plans(sections, reports).values() for plot in section_plots]
    write_plots(plots, out)
    texts = published_texts(sections, out, reports)
    for name, text in texts.items():
        atomic_write(out / name, text)
    if prune:
        _prune_records(sections, out, expected)
        remove_stale_plots(plots, out)
    return [out / name for name in texts] + [out / PLOTS_DIR / f for plot in plots for f in plot.files]


def _copy_records(sections: Sequence[Section], out: Path) -> set[Path]:
    """Copy the sections' records into their folders under ``out/records``; return every record path it holds.

    A record already inside one of the source folders is left as it is.
    """
    from tokbench.results import record_filename, write_record

    sources = [source.resolve() for s in sections for source in s.sources]
    expected = set()
    for section in sections:
        folder = records_folder(section, out)
        for record in section.records:
            path = folder / record_filename(record["task"], record["model"], record["config_hash"])
            expected.add(path.resolve())
            if not any(path.resolve().is_relative_to(source) for source in sources):
                write_record(folder, record)
    return expected


def _prune_records(sections: Sequence[Section], out: Path, expected: set[Path]) -> None:
    """Remove the record files directly in each published section's folder that this publish did not write.

    The unnamed section's folder is ``records/`` itself: the named sections' subfolders are not its files.
    """
    sources = [source.resolve() for s in sections for source in s.sources]
    for section in sections:
        for stale in records_folder(section, out).glob("*.json"):
            path = stale.resolve()
            if stale.is_file() and path not in expected and not any(path.is_relative_to(s) for s in sources):
                stale.unlink()
