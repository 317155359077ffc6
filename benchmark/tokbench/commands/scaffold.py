"""``tokbench new-task`` and ``tokbench new-model``: scaffold an installable plugin package.

The package is rendered from the templates in ``tokbench/templates/<kind>/``:
``package/`` becomes the import package, ``.tmpl`` suffixes are dropped, and
``${name}``-style placeholders are filled in (:class:`string.Template`).
"""
from __future__ import annotations

import argparse
import importlib.util
import re
from dataclasses import dataclass
from importlib.metadata import entry_points
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path
from string import Template

from tokbench import __version__
from tokbench.commands import loaded_registry
from tokbench.errors import UsageError
from tokbench.plugins import ENTRY_POINT_GROUP

KINDS = ("task", "model")
NAME_PATTERN = re.compile(r"[a-z][a-z0-9]*(?:[-_][a-z0-9]+)*")
DIST_PATTERN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")  # a distribution name (PEP 508)
PACKAGE_PATTERN = re.compile(r"[a-z_][a-z0-9_]*")
TEMPLATE_SUFFIX = ".tmpl"


def register(subparsers: argparse._SubParsersAction) -> None:
    for kind in KINDS:
        parser = subparsers.add_parser(
            f"new-{kind}", help=f"create an installable {kind} plugin package, with tests, from a working example",
            description=f"Create a folder holding a complete {kind} plugin: pyproject.toml with the entry point, "
            f"an example {kind}, tests that run the conformance kit, and a README. Then `pip install -e` it.")
        parser.add_argument("name", help=f"the {kind}'s name: lowercase letters and digits, words joined by - or _")
        parser.add_argument("--dir", type=Path, metavar="DIR", help="the folder to create (default: ./DIST)")
        parser.add_argument("--dist", metavar="DIST",
                            help="the distribution name in pyproject.toml and for pip (default: tokbench-NAME)")
        parser.add_argument("--package", metavar="PKG",
                            help="the import package, also the entry-point name (default: tokbench_NAME)")
        parser.add_argument("--force", action="store_true",
                            help="write into DIR even if it exists (generated files are replaced)")
        parser.set_defaults(handler=_new, kind=kind)


@dataclass(frozen=True)
class Names:
    """Every name a plugin package for ``name`` needs."""

    kind: str
    name: str
    dist_name: str | None = None
    package: str | None = None

    @property
    def module(self) -> str:
        return self.package or "tokbench_" + self.name.replace("-", "_")

    @property
    def dist(self) -> str:
        return self.dist_name or "tokbench-" + self.name

    @property
    def entry_point(self) -> str:
        return self.package or self.name

    @property
    def class_name(self) -> str:
        return "".join(part.capitalize() for part in re.split(r"[-_]", self.name))

    def substitutions(self) -> dict[str, str]:
        release = __version__.split("+")[0]
        requirement = '"tokbench"' if release in ("0", "") else f'"tokbench>={release}"'
        return {"kind": self.kind, "name": self.name, "module": self.module, "dist": self.dist,
                "entry_point": self.entry_point, "class_name": self.class_name, "tokbench_requirement": requirement}


def check_name(kind: str, name: str, dist: str | None = None, package: str | None = None) -> Names:
    """Refuse a name, distribution or package that is not valid or that installed plugins already use."""
    if not NAME_PATTERN.fullmatch(name):
        raise UsageError(
            f"{kind} name {name!r} is not a valid identifier; use lowercase letters and digits, words joined by "
            f"single - or _, starting with a letter (e.g. 'my-{kind}')"
        )
    if dist is not None and not DIST_PATTERN.fullmatch(dist):
        raise UsageError(f"--dist {dist!r} is not a valid distribution name; use letters, digits, '-', '_' and '.', "
                         "starting and ending with a letter or digit (e.g. 'tokbench-my-tasks')")
    if package is not None and not PACKAGE_PATTERN.fullmatch(package):
        raise UsageError(f"--package {package!r} is not a valid import package name; use lowercase letters, digits "
                         "and '_', not starting with a digit (e.g. 'my_tasks')")
    names = Names(kind, name, dist, package)
    registry = loaded_registry()
    specs = registry.tasks if kind == "task" else registry.models
    if name in specs:
        raise UsageError(f"{kind} {name!r} is already registered (by {specs[name].plugin}); choose another name")
    if importlib.util.find_spec(names.module) is not None:
        raise UsageError(f"a package named {names.module!r} is already installed; choose another name")
    if any(ep.name == names.entry_point for ep in entry_points(group=ENTRY_POINT_GROUP)):
        raise UsageError(f"a plugin named {names.entry_point!r} is already installed (see `tokbench plugins`); "
                         "choose another name")
    return names


def _template_files(root: Traversable, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], str]]:
    """(relative path parts, text) of every template file under ``root``."""
    found = []
    for entry in sorted(root.iterdir(), key=lambda e: e.name):
        if entry.is_dir():
            found += _template_files(entry, (*prefix, entry.name))
        elif entry.name.endswith(TEMPLATE_SUFFIX):
            found.append(((*prefix, entry.name), entry.read_text(encoding="utf-8")))
    return found


def scaffold(names: Names, folder: Path, force: bool = False) -> list[Path]:
    """Render the ``names.kind`` templates into ``folder``; return the files written."""
    if folder.exists() and not force:
        raise UsageError(
            f"folder {folder} already exists; choose another --dir, or pass --force to overwrite the generated files")
    values = names.substitutions()
    written = []
    for parts, text in _template_files(files("tokbench") / "templates" / names.kind):
        relative = [names.module if part == "package" else part for part in parts]
        relative[-1] = relative[-1].removesuffix(TEMPLATE_SUFFIX)
        target = folder.joinpath(*relative)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(Template(text).substitute(values), encoding="utf-8")
        written.append(target)
    return written


def _new(args: argparse.Namespace) -> int:
    names = check_name(args.kind, args.name, args.dist, args.package)
    folder = args.dir or Path(names.dist)
    written = scaffold(names, folder, args.force)
    listing = "tasks" if args.kind == "task" else "models"
    pairing = f"--task {names.name}" if args.kind == "task" else f"--task random-walk --model {names.name}"
    print(f"created {folder}/ with {len(written)} files: the {args.kind} {names.name!r} in package {names.module} "
          f"of distribution {names.dist}")
    print("next steps:")
    for line in (f"pip install -e {folder}", f"tokbench ls {listing}", f"tokbench run {pairing}", f"pytest {folder}"):
        print(f"  {line}")
    return 0
