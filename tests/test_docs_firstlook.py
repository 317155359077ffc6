"""What README.md promises of the first look (`tokbench run` with no arguments): with only the built-ins its
first line states the grid; where installed plugins make the grid larger, the first line says how many pairings
they add and how to narrow it; a run narrowed by --task does not call itself the first look. (Its time is
measured by `python benchmark/bench/run.py --only firstlook`, not here: a test must not depend on the load.)"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tokbench.grid import expand
from tokbench.plugins import origin, registry
from tokbench.suites import load_suite

BUILTIN = "walks,scc,attention,baselines,retrieval,markov,models"


def first_line(out: Path, env: dict[str, str], *args: str) -> str:
    """The first line `tokbench run` prints on stderr (the grid it starts), then the run is stopped."""
    process = subprocess.Popen([sys.executable, "-m", "tokbench.cli", "run", "--out", str(out), "-q", *args],
                               stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
                               env={**os.environ, **env})
    try:
        assert process.stderr is not None
        line = next(line for line in process.stderr if "pairings to run" in line or "error" in line)
    finally:
        process.kill()  # its workers stop within a second (README, Reliability); nothing here needs a record
        process.communicate(timeout=120)
    return line


def test_plugins_that_grow_the_first_look_are_named_on_its_first_line(tmp_path, plugin_site):
    env = {**plugin_site(v2="contract_v2"), "TOKBENCH_PLUGINS": f"{BUILTIN},v2"}
    line = first_line(tmp_path / "runs", env)
    assert "pairings to run from suite 'default'" in line, line
    added = int(re.search(r"\((\d+) of them from installed plugins", line).group(1))
    assert added > 0  # the plugin's task with every model, and its models with every task
    assert "from installed plugins" in line and "--task/--model" in line and "TOKBENCH_DISABLE_PLUGINS" in line


def test_the_builtin_first_look_says_nothing_of_plugins(tmp_path):
    line = first_line(tmp_path / "runs", {"TOKBENCH_PLUGINS": BUILTIN})
    planned = [p for p in expand(load_suite("default"), registry())
               if origin(p.task_spec) == origin(p.model_spec) == "builtin"]
    assert f"{len(planned)} of {len(planned)} pairings to run from suite 'default'" in line
    assert "plugins" not in line
