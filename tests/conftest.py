"""Shared fixtures: run the CLI in a subprocess, install throwaway plugins through real entry points."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

# One intra-op thread for the tests and the CLI processes they start: the models are small, and
# on 2 shared cores torch's default thread pool made them up to 10x slower without changing a number.
os.environ["OMP_NUM_THREADS"] = "1"
# pytest-xdist's workers run with COLUMNS=80 and LINES=24 in their environment; piped commands honour COLUMNS (a
# user's setting), so the tests start without it, as a plain shell does, and set it where they test it.
os.environ.pop("COLUMNS", None)
os.environ.pop("LINES", None)

FAKE_PLUGINS = Path(__file__).parent / "fake_plugins"


def run_cli(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
            timeout: float = 600) -> subprocess.CompletedProcess:
    """Run ``tokbench ARGS`` in a fresh interpreter, as a user would."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "tokbench.cli", *args], capture_output=True, text=True,
                          env=full_env, cwd=cwd, timeout=timeout)


@pytest.fixture
def cli() -> Callable[..., subprocess.CompletedProcess]:
    return run_cli


@pytest.fixture
def plugin_site(tmp_path: Path) -> Callable[..., dict[str, str]]:
    """Install fake plugin modules as a distribution with real ``tokbench`` entry points.

    Returns a function ``install(**{entry_point_name: module_name})`` (a module ``NAME_impl.py`` beside
    a hook module ``NAME.py`` is installed with it) giving the
    environment (PYTHONPATH) under which the CLI sees that distribution.
    """
    site = tmp_path / "site"
    site.mkdir()

    def install(**entry_points: str) -> dict[str, str]:
        dist_info = site / "tokbench_fake_plugins-0.1.dist-info"
        dist_info.mkdir(exist_ok=True)
        (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: tokbench-fake-plugins\nVersion: 0.1\n")
        lines = ["[tokbench]"] + [f"{name} = {module}" for name, module in entry_points.items()]
        (dist_info / "entry_points.txt").write_text("\n".join(lines) + "\n")
        for module in entry_points.values():
            shutil.copy(FAKE_PLUGINS / f"{module}.py", site / f"{module}.py")
            implementation = FAKE_PLUGINS / f"{module}_impl.py"  # a hook module's heavy half, where it has one
            if implementation.exists():
                shutil.copy(implementation, site / implementation.name)
        return {"PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))}

    return install
