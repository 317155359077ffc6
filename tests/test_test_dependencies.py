"""The README's test command works on a fresh machine: every third-party module the tests import is declared.

``pip install -e ".[test]" && python -m pytest`` must collect in a new virtual environment, so a module that a
test imports has to come from the project's dependencies or its ``test`` extra, never from whatever the
developer's machine happens to have installed.
"""
from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
# Modules the tests import that are not third-party distributions: the project's own packages (installed by
# the project itself) and the test folder's helper modules.
PROJECT_PACKAGES = {path.name for base in ("benchmark", "plugins") for path in (ROOT / base).iterdir()
                    if (path / "__init__.py").exists()}
# the benchmark's section modules, which tests of the benchmark import from benchmark/bench/ by path
LOCAL_MODULES = ({path.stem for path in [*TESTS.glob("*.py"), *TESTS.glob("fake_plugins/*.py")]} | {"fake_plugins"}
                 | {path.stem for path in (ROOT / "benchmark" / "bench").glob("*.py")})
# Optional packages a test reads only where installed, the test skipping (with its reason) elsewhere: the
# TensorBoard logger's event files are read with whichever of the two is there (tests/test_plugins_run.py).
OPTIONAL_MODULES = {"tensorboard", "tensorboardX"}


def _imported_top_level_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def _declared_distributions() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = project["dependencies"] + project["optional-dependencies"]["test"]
    return {re.match(r"[A-Za-z0-9_.-]+", line).group().lower().replace("_", "-") for line in requirements}


def _distributions_of(module: str) -> set[str]:
    return {name.lower().replace("_", "-") for name in packages_distributions().get(module, [])}


def _third_party_imports() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in sorted(TESTS.rglob("*.py")):
        if "fake_plugins" in path.parts:  # throwaway plugins, installed by the tests themselves
            continue
        for module in _imported_top_level_modules(path):
            if (module in sys.stdlib_module_names or module in PROJECT_PACKAGES or module in LOCAL_MODULES
                    or module in OPTIONAL_MODULES):
                continue
            found.setdefault(module, []).append(path.name)
    return found


def test_the_scan_sees_the_tests_third_party_imports() -> None:
    """The check below is not vacuous: it finds the imports it is meant to judge."""
    modules = _third_party_imports()
    assert {"torch", "pytest", "hypothesis", "jsonschema"} <= set(modules)


@pytest.mark.parametrize("module", sorted(_third_party_imports()))
def test_every_third_party_module_the_tests_import_is_declared(module: str) -> None:
    distributions = _distributions_of(module)
    assert distributions, f"{module} (imported by {_third_party_imports()[module]}) is not installed"
    declared = _declared_distributions()
    assert distributions & declared, (
        f"tests import {module!r} ({', '.join(_third_party_imports()[module])}) from {sorted(distributions)}, "
        f"which neither [project].dependencies nor the `test` extra declares: a fresh `pip install -e \".[test]\"` "
        f"cannot collect them")
