"""``tokbench ls``, ``tokbench plugins`` and ``tokbench show``: what is installed."""
from __future__ import annotations

import argparse
import re
import json

from rich.markup import escape
from rich.table import Table

from tokbench import hookspecs
from tokbench.commands import loaded_registry, output_console
from tokbench.params import parse_assignments
from tokbench.specs import ModelSpec, TaskSpec


def register(subparsers: argparse._SubParsersAction) -> None:
    ls = subparsers.add_parser("ls", help="list registered tasks or models")
    ls.add_argument("what", choices=("tasks", "models"))
    ls.add_argument("--json", action="store_true", help="machine-readable output")
    ls.set_defaults(handler=_ls)

    plugins = subparsers.add_parser("plugins", help="list installed plugins, their hooks and load errors")
    plugins.add_argument("--json", action="store_true", help="machine-readable output")
    plugins.set_defaults(handler=_plugins)

    show = subparsers.add_parser("show", help="describe one task or model, with its parameters")
    show.add_argument("what", choices=("task", "model"))
    show.add_argument("name")
    show.add_argument("--set", dest="settings", action="extend", nargs="+", default=[], metavar="KEY=VALUE",
                      help="parameter overrides (tasks: also describes the instance, e.g. its automaton)")
    show.add_argument("--json", action="store_true", help="machine-readable output")
    show.set_defaults(handler=_show)


# A period that ends one of these does not end a sentence ("Edelman et al. 2024", "i.i.d. uniform").
_ABBREVIATIONS = ("...", "al.", "e.g.", "i.e.", "i.i.d.", "cf.", "vs.", "resp.", "Fig.", "Eq.", "Sec.", "approx.")
_SENTENCE_END = re.compile(r"\.\s+")


def _first_sentence(text: str) -> str:
    """The text up to the first period that ends a sentence: outside brackets, not an abbreviation's."""
    for match in _SENTENCE_END.finditer(text):
        head = text[:match.start() + 1]
        if head.endswith(_ABBREVIATIONS) or head.count("(") > head.count(")") or head.count("[") > head.count("]"):
            continue
        return head
    return text


def _ls(args: argparse.Namespace) -> int:
    reg = loaded_registry()
    specs = sorted((reg.tasks if args.what == "tasks" else reg.models).values(), key=lambda s: s.name)
    if args.json:
        print(json.dumps([s.to_json() for s in specs], indent=2))
        return 0
    table = Table(title=f"{len(specs)} {args.what}", title_justify="left")
    for column in ("name", "version", "plugin", "description"):
        table.add_column(column, overflow="fold")
    for spec in specs:
        table.add_row(escape(spec.name), escape(spec.version), escape(spec.plugin), escape(_first_sentence(spec.description)))
    output_console().print(table)
    return 0


def _plugins(args: argparse.Namespace) -> int:
    reg = loaded_registry(warn=False)
    if args.json:
        print(json.dumps([p.to_json() for p in reg.plugins], indent=2))
        return 0
    table = Table(title=f"{len(reg.plugins)} plugins (entry-point group 'tokbench')", title_justify="left")
    for column in ("name", "distribution", "status", "contract", "hooks", "registered", "error"):
        table.add_column(column, overflow="fold")
    for p in reg.plugins:
        registered = ", ".join(p.tasks + p.models)
        style = {"ok": "green", "error": "red", "disabled": "yellow"}[p.status]
        table.add_row(escape(p.name), escape(f"{p.distribution} {p.version}"), f"[{style}]{p.status}[/]",
                      _contract_text(p.contract), ", ".join(p.hooks), escape(registered), escape(p.error or ""))
    output_console().print(table)
    return 0


def _contract_text(contract: int | None) -> str:
    """The plugin's contract, marked where it runs through the adapter of an older one; blank if never read."""
    if contract is None:
        return ""
    return str(contract) if contract >= hookspecs.CONTRACT else f"{contract} (adapted)"


def _params_table(spec: TaskSpec | ModelSpec, values: dict) -> Table:
    table = Table(title="parameters", title_justify="left")
    for column in ("name", "value", "default", "allowed", "help"):
        table.add_column(column, overflow="fold")
    for p in spec.params:
        table.add_row(p.name, escape(repr(values[p.name])), escape(repr(p.default)), escape(p.allowed()), escape(p.help))
    return table


def _show(args: argparse.Namespace) -> int:
    reg = loaded_registry()
    spec = reg.task(args.name) if args.what == "task" else reg.model(args.name)
    values = spec.resolve(parse_assignments(args.settings))
    if args.json:
        print(json.dumps({**spec.to_json(), "resolved": values}, indent=2))
        return 0
    console = output_console()
    console.print(f"[bold]{escape(spec.name)}[/] v{escape(spec.version)}  ({escape(spec.plugin)})")
    console.print(escape(spec.description))
    if spec.citation:
        console.print(f"cite: {escape(spec.citation)}")
    if isinstance(spec, ModelSpec):
        console.print(f"family: {escape(spec.family_name)}; default recipe: {spec.recipe.describe()}")
        if spec.fixed_length:
            console.print(f"fixed length (not evaluated at other context lengths): {escape(spec.fixed_length)}")
    console.print(_params_table(spec, values))
    if isinstance(spec, TaskSpec):
        if spec.difficulty:
            console.print(f"difficulty axes (what a suite's ladder may vary): {', '.join(spec.difficulty)}")
        if spec.pitfall:
            console.print(f"pitfall: {escape(spec.pitfall)}")
        if spec.evaluation_axes:
            axes = ", ".join(spec.evaluation_axes)
            console.print(escape(f"evaluation axes (what [grid.evaluate] may change): {axes}"))
        elif spec.evaluation_note:
            console.print(f"no evaluation axes: {escape(spec.evaluation_note)}")
        console.print(escape(spec.create(values).describe()))
    return 0
