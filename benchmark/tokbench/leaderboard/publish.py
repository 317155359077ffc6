"""Write a leaderboard: one text format, or the whole published folder.

The published folder holds README.md (with its detail tables in details.md),
leaderboard.csv, leaderboard.json, leaderboard.tex, index.html, plots/ and the
run records behind them in records/, so it regenerates from its own contents.

Publishing only adds or replaces the files it writes, each atomically, and lists
every one in the folder's manifest (``SHA256SUMS``, :mod:`tokbench.manifest`). Files
it did not write stay. Files an earlier publish wrote and this one did not (records of
sections not published this time, plots of an older layout) stay unless ``prune`` asks
to remove them, and even then only plots and records in the published sections' own
folders are removed. A manifest naming a path outside the folder stops the publish before
anything is written or removed (:func:`tokbench.manifest.read`).
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
    from tokbench.leaderboard.views import PAGE_CHARS

    from tokbench.commands import output_console

    console = console or output_console()
    to_terminal(document(build_reports(sections), brief=True, width=max(PAGE_CHARS, console.width)), console)


def write_format(sections: Sequence[Section], fmt: str, out: Path) -> Path:
    from tokbench.storage import atomic_write

    return atomic_write(out / FILES[fmt], render(sections, fmt))


def records_folder(section: Section, out: Path) -> Path:
    """Where the published folder keeps a section's records: ``records/`` or ``records/<name>/``."""
    return out / RECORDS_DIR / section.name if section.name else out / RECORDS_DIR


def regenerate_commands(sections: Sequence[Section], out: Path) -> list[str]:
    """The commands that remake the published folder ``out`` from the repository root.

    By the published folder's convention, a named section holds the run of the suite of that
    name on the tasks its records hold; a name that is no built-in suite comes from a suite file of a plugin,
    which the records do not name, so its line says what to do instead of guessing a command.
    """
    from tokbench.suites import builtin_suites

    runs, options = [], []
    for section in sections:
        folder = records_folder(section, out).as_posix()
        if section.name:
            runs.append(f"tokbench run --suite {section.name}{_task_flags(section)}{_adaptive_flags(section)} "
                        f"--out {folder}"
                        if section.name in builtin_suites() else
                        f"# {section.name}: not a built-in suite: install the plugins it needs (pip install -e DIR), "
                        f"then tokbench run --suite THEIR_SUITE.toml --out {folder}")
            options.append(f"--records {section.name}={folder}")
        else:
            options.append(f"--records {folder}")
    first = "# first install every plugin that provides a task or model the records name (see tokbench plugins)"
    return [first, *runs, f"tokbench leaderboard {' '.join(options)} --format all --out {out.as_posix()} --prune"]


def _task_flags(section: Section) -> str:
    """`` --task A B --model C D``: the tasks and models the section's records hold, which may be a part of the
    suite's (the records cannot say which plugins the suite would add here)."""
    return "".join(f" --{kind} " + " ".join(sorted({record[kind] for record in section.records}))
                   for kind in ("task", "model"))


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
    """Write the published folder into ``out``: its records, plots, every text format and the manifest.

    The manifest (:mod:`tokbench.manifest`) lists every file tokbench wrote there. With
    ``prune``, files that the previous manifest lists and this publish did not write are
    removed: plots, and records in the published sections' own record folders (never
    another section's, never a source folder's, never a record of a newer schema). A file
    the manifest does not list is never removed, and a README.md that tokbench did not
    write is never overwritten (:class:`UsageError` before anything is written).
    """
    from tokbench import manifest
    from tokbench.leaderboard.plots import PLOTS_DIR, write_plots
    from tokbench.results import STAMP
    from tokbench.storage import atomic_write

    from tokbench.leaderboard.report import build_reports

    reports = build_reports(sections)  # computed once: every text and plot below only renders it
    previous = manifest.read(out) or {}
    texts = published_texts(sections, out, reports)
    _check_readme(out, previous, texts[FILES["md"]])
    records = _copy_records(sections, out)
    plots = [plot for section_plots in plot_plans(sections, reports).values() for plot in section_plots]
    write_plots(plots, out)
    for name, text in texts.items():
        atomic_write(out / name, text)
    written = [out / name for name in texts] + [out / PLOTS_DIR / f for plot in plots for f in plot.files]
    entries = {name: value for name, value in previous.items() if (out / name).is_file()}
    if prune:
        for name in _prunable(sections, out, previous, {p.resolve() for p in [*written, *records]}):
            (out / name).unlink()
            entries.pop(name, None)
    out_root = out.resolve()
    # the verification stamps in the folder too: the page states them, so an edit of one must show
    stamps = [folder / STAMP for section in sections for folder in section.sources if (folder / STAMP).is_file()]
    entries.update({path.resolve().relative_to(out_root).as_posix(): manifest.digest(path)
                    for path in [*written, *records, *stamps] if path.resolve().is_relative_to(out_root)})
    manifest.write(out, entries)
    return written


def _check_readme(out: Path, previous: Mapping[str, str], text: str) -> None:
    """Refuse to overwrite a README.md that tokbench did not write: one the manifest does not list and whose
    first line is not the published README's (folders published before the manifest existed pass)."""
    from tokbench.errors import UsageError

    readme = out / FILES["md"]
    if not readme.is_file() or FILES["md"] in previous:
        return
    first = readme.read_text(encoding="utf-8", errors="replace").partition("\n")[0]
    if first != text.partition("\n")[0]:
        raise UsageError(f"--out {out}: {readme} was not written by tokbench and publishing would overwrite it; "
                         "move it away or choose another --out")


def _copy_records(sections: Sequence[Section], out: Path) -> list[Path]:
    """Copy the sections' records into their folders under ``out/records``; return every record path it holds.

    A record already inside one of the source folders is left as it is.
    """
    from tokbench.results import record_filename, write_record

    sources = [source.resolve() for s in sections for source in s.sources]
    paths = []
    for section in sections:
        folder = records_folder(section, out)
        for record in section.records:
            path = folder / record_filename(record["task"], record["model"], record["config_hash"])
            paths.append(path)
            if not any(path.resolve().is_relative_to(source) for source in sources):
                write_record(folder, record)
    return paths


def _prunable(sections: Sequence[Section], out: Path, previous: Mapping[str, str], kept: set[Path]) -> list[str]:
    """The files of the previous manifest that this publish did not write and ``--prune`` removes: plots, and
    records directly in a published section's folder (the unnamed section's is ``records/`` itself) that are
    in no source folder and not of a newer schema."""
    from tokbench.leaderboard.plots import PLOTS_DIR
    from tokbench.results import RecordError, load_record

    sources = [source.resolve() for s in sections for source in s.sources]
    folders = {records_folder(section, out).resolve() for section in sections}
    names = []
    for name in previous:
        path = (out / name).resolve()
        if path in kept or not path.is_file() or any(path.is_relative_to(source) for source in sources):
            continue
        if Path(name).parts[0] == PLOTS_DIR:
            names.append(name)
        elif path.parent in folders and path.suffix == ".json":
            try:
                load_record(path)
            except RecordError as exc:
                if exc.newer_hash is not None:
                    continue  # a newer tokbench's record: never removed
            names.append(name)
    return names
