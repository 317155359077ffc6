"""What ``tokbench run`` shows while it works: a live rich display, or one plain line per pairing.

The live display (a terminal, without ``-q``) shows pairings done / total with
the ETA, the pairings running now, and the failures so far. Elsewhere (a pipe, a
log file, CI) each finished pairing prints one line.
"""
from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from tokbench.grid import Pairing

SHOWN_FAILURES = 8


def _format(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)):
        return ",".join(_format(v) for v in value)
    return str(value)


def variant_labels(identities: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """For each config hash, the parameters that tell it apart from the other variants of its task x model.

    ``identities`` are records or pairing identities with a ``config_hash``; seeds are
    not part of a variant. A parameter name that two namespaces share keeps its prefix.
    """
    # O(n) in the identities: each distinct params object is flattened once (the seeds of a pairing's
    # variant share theirs), and each parameter's values are collected in one pass.
    groups: dict[tuple[str, str], dict[int, tuple[Mapping, list[str]]]] = defaultdict(dict)
    for ident in identities:
        params = ident["params"]
        entry = groups[ident["task"], ident["model"]].setdefault(id(params), (params, []))
        entry[1].append(ident["config_hash"])
    labels = {}
    for variants in groups.values():
        flat = [{(ns, k): v for ns, values in params.items()
                 for k, v in (values.items() if isinstance(values, Mapping) else [(ns, values)])}  # evaluate: a list
                for params, _ in variants.values()]
        seen: dict[tuple[str, str], set[str]] = defaultdict(set)
        for key in {key for f in flat for key in f}:
            for f in flat:
                seen[key].add(repr(f.get(key)))
        varying = sorted(key for key, values in seen.items() if len(values) > 1)
        bare = [k for _, k in varying]
        for (_, hashes), values in zip(variants.values(), flat):
            label = " ".join(
                f"{k if bare.count(k) == 1 else ns + '.' + k}={_format(values.get((ns, k)))}" for ns, k in varying)
            labels.update(dict.fromkeys(hashes, label))
    return labels


def pairing_label(ident: Mapping[str, Any], variants: Mapping[str, str]) -> str:
    variant = variants.get(ident["config_hash"], "")
    return f"{ident['task']} × {ident['model']}{' [' + variant + ']' if variant else ''} seed {ident['seed']}"


def outcome(record: Mapping[str, Any]) -> str:
    if record["status"] == "failed":
        return record["error"]
    if record["status"] == "not_applicable":
        return f"not applicable: {record['error']}"
    return f"accuracy {record['metrics']['accuracy']:.3f}  {record['train'].get('wall_seconds', 0):.1f}s"


class _Labels:
    def __init__(self, pairings: Iterable[Pairing]) -> None:
        self.variants = variant_labels(p.header for p in pairings)

    def __call__(self, pairing: Pairing) -> str:
        return pairing_label(pairing.header, self.variants)


class PlainProgress:
    """One line per finished pairing, for logs and pipes."""

    def __init__(self, pairings: list[Pairing], console: Console) -> None:
        self.total, self.done, self.console, self.label = len(pairings), 0, console, _Labels(pairings)

    def __enter__(self) -> PlainProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def started(self, pairing: Pairing) -> None:
        pass

    def finished(self, pairing: Pairing, record: Mapping[str, Any]) -> None:
        self._line({"ok": "ok", "failed": "FAILED", "not_applicable": "n/a"}[record["status"]], pairing,
                   outcome(record))

    def taken(self, pairing: Pairing, record: Mapping[str, Any]) -> None:
        self._line("skip", pairing, "recorded meanwhile by another run")

    def _line(self, status: str, pairing: Pairing, text: str) -> None:
        self.done += 1
        width = len(str(self.total))
        self.console.print(f"[{self.done:{width}}/{self.total}] {status:6} {self.label(pairing)}  {text}",
                           markup=False, highlight=False, soft_wrap=True)


class LiveProgress:
    """A live rich display: a progress bar with the ETA, the pairings running now, the failures so far."""

    def __init__(self, pairings: list[Pairing], console: Console) -> None:
        self.label = _Labels(pairings)
        self.bar = Progress(TextColumn("pairings"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                            TextColumn("eta"), TimeRemainingColumn(), console=console)
        self.bar_task = self.bar.add_task("pairings", total=len(pairings))
        self.running: dict[str, tuple[str, float]] = {}
        self.failures: list[tuple[str, str]] = []
        self.live = Live(self, console=console, refresh_per_second=4)

    def __enter__(self) -> LiveProgress:
        self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.live.__exit__(*exc)

    def __rich__(self) -> RenderableType:
        parts: list[RenderableType] = [self.bar]
        if self.running:
            running = Table.grid(padding=(0, 2))
            now = time.monotonic()
            for label, since in self.running.values():
                running.add_row("[cyan]running[/]", escape(label), f"{now - since:.0f}s")
            parts.append(running)
        if self.failures:
            failures = Table.grid(padding=(0, 2))
            for label, error in self.failures[-SHOWN_FAILURES:]:
                failures.add_row("[red]failed[/]", escape(label), escape(error))
            hidden = len(self.failures) - SHOWN_FAILURES
            parts.append(failures if hidden <= 0 else Group(failures, f"[red]... and {hidden} more failures[/]"))
        return Group(*parts)

    def started(self, pairing: Pairing) -> None:
        self.running[pairing.config_hash] = (self.label(pairing), time.monotonic())

    def finished(self, pairing: Pairing, record: Mapping[str, Any]) -> None:
        label, _ = self.running.pop(pairing.config_hash, (self.label(pairing), 0.0))
        if record["status"] == "failed":
            self.failures.append((label, record["error"]))
        self.bar.advance(self.bar_task)

    def taken(self, pairing: Pairing, record: Mapping[str, Any]) -> None:
        self.bar.advance(self.bar_task)


def make_progress(pairings: list[Pairing], console: Console, quiet: bool) -> PlainProgress | LiveProgress:
    if quiet or not console.is_terminal:
        return PlainProgress(pairings, console)
    return LiveProgress(pairings, console)
