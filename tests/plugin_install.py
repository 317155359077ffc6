"""Install a plugin package for real (``pip install -e``) into a throwaway virtual environment.

The environment sees every package of the running interpreter (tokbench
included), so the plugin joins the same registry a user would get; and since
the install lands in the throwaway environment, the interpreter running the
tests is never changed, even if a test is killed half-way.
"""
from __future__ import annotations

import os
import site
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

PIP = ("-m", "pip", "--disable-pip-version-check", "--no-input")


class Environment:
    """A virtual environment whose ``python`` runs commands as a user of the installed plugin would."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.python = root / ("Scripts/python.exe" if os.name == "nt" else "bin/python")

    def run(self, *args: str, cwd: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
        return subprocess.run([str(self.python), *args], capture_output=True, text=True, cwd=cwd, timeout=timeout)

    def tokbench(self, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
        return self.run("-m", "tokbench.cli", *args, cwd=cwd)

    def check(self, *args: str, cwd: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
        result = self.run(*args, cwd=cwd, timeout=timeout)
        assert result.returncode == 0, f"{' '.join(args)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
        return result


def create(root: Path) -> Environment:
    """A fresh environment that also sees the running interpreter's site-packages (and their .pth files)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, capture_output=True)
    env = Environment(root)
    own_site = env.check("-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip()
    parents = [p for p in [*site.getsitepackages(), site.getusersitepackages()] if Path(p).is_dir()]
    # An `import` line in a .pth file runs at start-up; addsitedir also processes the parents' .pth files,
    # which is where editable installs (tokbench's own, in development) put themselves.
    Path(own_site, "_parent_site.pth").write_text(f"import site; list(map(site.addsitedir, {parents!r}))\n")
    return env


@contextmanager
def installed(package: Path, distribution: str, root: Path) -> Iterator[Environment]:
    """``pip install --no-deps -e package`` in a new environment at ``root``; uninstalled on the way out."""
    env = create(root)
    env.check(*PIP, "install", "--no-deps", "--no-build-isolation", "--no-index", "-e", str(package))
    try:
        yield env
    finally:
        env.check(*PIP, "uninstall", "-y", distribution)
