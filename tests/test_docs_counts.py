"""The counts in README.md that drift as tasks, models and suites change are checked against the registry.

Expectations come from the installed built-ins (``tokbench.plugins.origin``), never from typed
constants: a new built-in task or model, or a suite that changes its grid, fails here until the
README says so.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tokbench.grid import expand
from tokbench.plugins import Registry, origin, registry
from tokbench.suites import builtin_suites, load_suite

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
_PLUGIN = re.compile(r"`(\w+)` \(([^()]*)\)")  # `models` (transformer, transformer-2l, ...)
_SUITE_ROW = re.compile(r"^\s*\| `([\w-]+)` \| ([\d,]+) \|", re.M)  # | `default` | 216 | ...


def section(title: str) -> str:
    """The README's text under ``## title``, up to the next ``## `` heading."""
    head = f"\n## {title}\n"
    assert head in README, f"README.md has no section {title!r}"
    return README.split(head, 1)[1].split("\n## ", 1)[0]


def expand_braces(name: str) -> list[str]:
    """``attn-{nope,rope}`` -> ``attn-nope``, ``attn-rope``."""
    match = re.search(r"\{([^{}]*)\}", name)
    if not match:
        return [name]
    return [n for part in match.group(1).split(",")
            for n in expand_braces(name[:match.start()] + part + name[match.end():])]


def builtins() -> Registry:
    """The registry less every plugin's task and model: the figures describe what tokbench ships."""
    reg = registry()
    return Registry({n: s for n, s in reg.tasks.items() if origin(s) == "builtin"},
                    {n: s for n, s in reg.models.items() if origin(s) == "builtin"}, reg.plugins)


def test_the_box_lists_every_builtin_task_and_model_and_nothing_else():
    reg = builtins()
    box = section("What is in the box")
    listed = {name for row in box.splitlines() if row.startswith("| ")
              for span in re.findall(r"`([^`]+)`", row.split("|")[2]) for name in expand_braces(span)}
    assert listed == set(reg.tasks) | set(reg.models)


def test_the_builtin_plugins_line_names_each_plugins_tasks_and_models():
    reg = builtins()
    by_plugin: dict[str, set[str]] = {}
    for spec in [*reg.tasks.values(), *reg.models.values()]:
        by_plugin.setdefault(spec.entry_point, set()).add(spec.name)
    line = re.search(r"^Built-in plugins: (.*?)\. `plugins/tokbench-qa`", README, re.M | re.S)
    assert line, "README.md: the 'Built-in plugins:' sentence"
    stated = {plugin: {n.strip() for n in names.replace(" and ", ", ").split(",") if n.strip()}
              for plugin, names in _PLUGIN.findall(" ".join(line.group(1).split()))}
    assert stated == by_plugin


@pytest.mark.parametrize("suite", sorted(builtin_suites()))
def test_speed_states_each_suites_current_pairing_count(suite):
    stated = {name: int(count.replace(",", "")) for name, count in _SUITE_ROW.findall(section("Speed"))}
    assert suite in stated, f"README.md, Speed: no row for the {suite} suite"
    planned = len(expand(load_suite(suite), builtins()))
    assert stated[suite] == planned, f"README.md, Speed: {suite} plans {planned} pairings, not {stated[suite]}"
