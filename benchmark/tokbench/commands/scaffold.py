"""``tokbench new-task`` and ``tokbench new-model``: scaffold an installable plugin package.

The package is rendered from the templates in ``tokbench/templates/<kind>/``:
``package/`` becomes the import package, ``.tmpl`` suffixes are dropped, and
``${name}``-style placeholders are filled in (:class:`string.Template`).

``--into DIR`` adds a task or model to a distribution scaffolded before: its
package becomes a subpackage of the distribution's package, with an entry point
of its own (named after it) added to ``pyproject.toml``, and its tests join the
distribution's ``tests/``. One distribution can so hold tasks and models.
"""
from __future__ import annotations

import argparse
import importlib.util
import re
from dataclasses import dataclass
from importlib.metadata import entry_points
from importlib.resources import files
from pathlib import Path
from string import Template
from typing import TYPE_CHECKING

from tokbench import __version__
from tokbench.commands import loaded_registry
from tokbench.errors import UsageError
from tokbench.plugins import ENTRY_POINT_GROUP
from tokbench.suites import tomllib  # the standard library's, or tomli on Python 3.10

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

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
                            help="the import package (default: tokbench_NAME); the entry point, the plugin name that "
                            "`tokbench plugins` shows and TOKBENCH_DISABLE_PLUGINS takes, is NAME")
        parser.add_argument("--into", type=Path, metavar="DIR",
                            help=f"add the {kind} to the distribution in DIR (made by new-task or new-model): a "
                            "subpackage of its package, with its own entry point NAME and its tests")
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
    entry_point_name: str | None = None

    @property
    def module(self) -> str:
        return self.package or "tokbench_" + self.name.replace("-", "_")

    @property
    def dist(self) -> str:
        return self.dist_name or "tokbench-" + self.name

    @property
    def entry_point(self) -> str:
        return self.entry_point_name or self.name

    @property
    def class_name(self) -> str:
        return "".join(part.capitalize() for part in re.split(r"[-_]", self.name))

    def substitutions(self) -> dict[str, str]:
        # the first release of this major.minor series: under semantic versioning (0.x: the minor), the lowest
        # tokbench that serves this contract
        release = ".".join(__version__.split("+")[0].split(".")[:2])
        requirement = f'"tokbench>={release}.0"' if "." in release else '"tokbench"'
        return {"kind": self.kind, "name": self.name, "module": self.module, "dist": self.dist,
                "entry_point": self.entry_point, "class_name": self.class_name, "tokbench_requirement": requirement}


def check_name(kind: str, name: str, dist: str | None = None, package: str | None = None,
               entry_point: str | None = None) -> Names:
    """Refuse a name, distribution or package that is not valid or that installed plugins already use."""
    if not NAME_PATTERN.fullmatch(name):
        raise UsageError(
            f"{kind} name {name!r} is not a valid identifier; use lowercase letters and digits, words joined by "
            f"single - or _, starting with a letter (e.g. 'my-{kind}')"
        )
    if dist is not None and not DIST_PATTERN.fullmatch(dist):
        raise UsageError(f"--dist {dist!r} is not a valid distribution name; use letters, digits, '-', '_' and '.', "
                         "starting and ending with a letter or digit (e.g. 'tokbench-my-tasks')")
    if package is not None and not all(PACKAGE_PATTERN.fullmatch(part) for part in package.split(".")):
        raise UsageError(f"--package {package!r} is not a valid import package name; use lowercase letters, digits "
                         "and '_', not starting with a digit (e.g. 'my_tasks')")
    names = Names(kind, name, dist, package, entry_point)
    registry = loaded_registry()
    specs = registry.tasks if kind == "task" else registry.models
    if name in specs:
        raise UsageError(f"{kind} {name!r} is already registered (by {specs[name].plugin}); choose another name")
    if _installed(names.module):
        raise UsageError(f"a package named {names.module!r} is already installed; choose another name")
    if any(ep.name == names.entry_point for ep in entry_points(group=ENTRY_POINT_GROUP)):
        raise UsageError(f"a plugin named {names.entry_point!r} is already installed (see `tokbench plugins`); "
                         "choose another name")
    return names


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a subpackage of a package that is not installed yet
        return False


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
    written = []
    for relative, text in render(names):
        target = folder.joinpath(*(names.module if part == "package" else part for part in relative))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        written.append(target)
    return written


def render(names: Names) -> list[tuple[tuple[str, ...], str]]:
    """(path parts under the templates' root, ``package`` standing for the package, rendered text) of each file."""
    values = names.substitutions()
    return [((*parts[:-1], parts[-1].removesuffix(TEMPLATE_SUFFIX)), Template(text).substitute(values))
            for parts, text in _template_files(files("tokbench") / "templates" / names.kind)]


ENTRY_POINTS_TABLE = "[project.entry-points.tokbench]"


def into_names(kind: str, name: str, folder: Path) -> Names:
    """The names of a ``kind`` called ``name`` added to the distribution scaffolded in ``folder``."""
    pyproject = folder / "pyproject.toml"
    try:
        project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
        packages = {value.split(":")[0].split(".")[0] for value in project["entry-points"]["tokbench"].values()}
        dist, (package,) = project["name"], packages
    except (OSError, KeyError, ValueError, tomllib.TOMLDecodeError):
        raise UsageError(f"--into {folder}: expected a plugin distribution made by `tokbench new-task` or "
                         f"`new-model`, whose pyproject.toml has a {ENTRY_POINTS_TABLE} table naming one package") from None
    return check_name(kind, name, dist, f"{package}.{name.replace('-', '_')}", entry_point=name)


def add_into(names: Names, folder: Path) -> list[Path]:
    """Render the ``names.kind`` package and tests into the distribution in ``folder``; add its entry point."""
    top, _, sub = names.module.partition(".")
    tests = {"conftest.py": "conftest.py", "test_conformance.py": f"test_{sub}_conformance.py",
             "test_task.py": f"test_{sub}.py", "test_model.py": f"test_{sub}.py"}
    target_of = {"package": lambda parts: folder.joinpath(top, sub, *parts),
                 "tests": lambda parts: folder.joinpath("tests", tests[parts[-1]])}
    written = []
    for relative, text in render(names):
        target = target_of[relative[0]](relative[1:]) if relative[0] in target_of else None
        if target is None or target.exists() and relative[-1] == "conftest.py":
            continue  # the README and pyproject.toml are the distribution's; its conftest is shared
        if target.exists():
            raise UsageError(f"{target} already exists; choose another name")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        written.append(target)
    pyproject = folder / "pyproject.toml"
    text = pyproject.read_text(encoding="utf-8")
    line = f'{names.entry_point} = "{names.module}"'
    pyproject.write_text(text.replace(ENTRY_POINTS_TABLE + "\n", f"{ENTRY_POINTS_TABLE}\n{line}\n", 1),
                         encoding="utf-8")
    return [*written, pyproject]


def _new(args: argparse.Namespace) -> int:
    if args.into is not None:
        if args.dir or args.dist or args.package or args.force:
            raise UsageError("--into adds to an existing distribution: it takes no --dir, --dist, --package or --force")
        names = into_names(args.kind, args.name, args.into)
        folder, written = args.into, add_into(names, args.into)
    else:
        names = check_name(args.kind, args.name, args.dist, args.package)
        folder = args.dir or Path(names.dist)
        written = scaffold(names, folder, args.force)
    listing = "tasks" if args.kind == "task" else "models"
    pairing = f"--task {names.name}" if args.kind == "task" else f"--task random-walk --model {names.name}"
    print(f"{'added to' if args.into else 'created'} {folder}/ {len(written)} files: the {args.kind} {names.name!r} "
          f"in package {names.module} of distribution {names.dist}, entry point {names.entry_point!r}")
    print("next steps:")
    for line in (f"pip install -e {folder}", f"tokbench ls {listing}", f"tokbench run {pairing}", f"pytest {folder}"):
        print(f"  {line}")
    return 0
