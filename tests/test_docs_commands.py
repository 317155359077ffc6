"""Every ``tokbench ...`` command in README.md, CONTRIBUTING.md and docs/ parses, so a renamed flag fails here.

Every command, usage line and inline mention names an existing subcommand and only its
flags; every complete command is parsed by the real command line (flags, choices and types,
without running it); and every ``tokbench run`` whose suite and plugins are at hand is
dry-run, which also checks the suite, task and model names and the ``--set`` keys.
"""
from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from tokbench.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
_FENCE = re.compile(r"^```.*?$(.*?)^```", re.M | re.S)
_SPAN = re.compile(r"`(tokbench [^`]+)`")


def commands(text: str, fenced: bool) -> list[list[str]]:
    """The ``tokbench`` command lines of fenced code blocks (or, with ``fenced`` False, of inline code spans,
    which are often fragments such as `tokbench show task`), comments and line continuations resolved."""
    if not fenced:
        return [shlex.split(line) for line in _SPAN.findall(_FENCE.sub("", text))]
    found = []
    for block in _FENCE.findall(text):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.strip().removeprefix("$ ")
            if line.startswith("tokbench "):
                found.append(shlex.split(line, comments=True))
    return found


def is_synopsis(words: list[str]) -> bool:
    """A usage line (``[--json]``, ``tasks|models``, ``NAME ...``) rather than a command to type."""
    return any(re.search(r"[\[\]|]|^\.\.\.$|^[A-Z][A-Z/_]*$", w) for w in words[1:])


def options(words: list[str]) -> list[str]:
    return [w.split("=")[0] for w in words if w.startswith("--")]


def _cases(fenced: bool) -> list[tuple[str, list[str]]]:
    return [(path.relative_to(ROOT).as_posix(), words) for path in DOCS
            for words in commands(path.read_text(encoding="utf-8"), fenced)]


CASES = _cases(fenced=True) + _cases(fenced=False)
LINES = [(d, w) for d, w in _cases(fenced=True) if not is_synopsis(w)]
RUNS = [(d, w) for d, w in LINES if w[1:2] == ["run"]]


def _id(doc: str, words: list[str]) -> str:
    return f"{doc}: {' '.join(words)}"[:90]


def test_the_documents_hold_commands():
    assert len(CASES) >= 10 and {doc for doc, _ in CASES} >= {"README.md", "CONTRIBUTING.md"}


@pytest.mark.parametrize("doc, words", CASES, ids=[_id(d, w) for d, w in CASES])
def test_documented_command_and_flags_exist(doc, words):
    """The subcommand exists and has every flag the document gives it (also in usage lines and prose)."""
    parser = build_parser()
    subcommands = next(a for a in parser._actions if a.dest == "command").choices
    name = next((w for w in words[1:] if not w.startswith("-")), None)
    target = subcommands.get(name.strip("[]")) if name else parser
    assert target is not None, f"{doc}: `{' '.join(words)}`: no subcommand {name!r}"
    known = {o for action in target._actions for o in action.option_strings}
    for flag in options([w.strip("[]") for w in words]):
        assert flag in known, f"{doc}: `{' '.join(words)}`: {name} has no option {flag}"


@pytest.mark.parametrize("doc, words", LINES, ids=[_id(d, w) for d, w in LINES])
def test_documented_command_parses(doc, words):
    try:
        build_parser().parse_args(words[1:])
    except SystemExit as exc:
        assert exc.code == 0 and {"--help", "--version"} & set(words), \
            f"{doc}: `{' '.join(words)}` does not parse (exit {exc.code})"


@pytest.mark.parametrize("doc, words", RUNS, ids=[_id(d, w) for d, w in RUNS])
def test_documented_run_dry_runs(doc, words, tmp_path, capsys, monkeypatch):
    from tokbench.plugins import registry
    from tokbench.suites import is_pattern, load_suite

    monkeypatch.chdir(ROOT)
    args = build_parser().parse_args(words[1:])
    if args.suite and args.suite.endswith(".toml") and not Path(args.suite).exists():
        pytest.skip(f"an example suite file that is not in the repository: {args.suite}")
    suite = load_suite(args.suite or "default")  # no --suite: default, or survey for what default lacks
    named = {*args.tasks, *args.models, *(n for b in suite.blocks for n in (*b.tasks, *b.models) if not is_pattern(n))}
    missing = named - {*registry().tasks, *registry().models}
    if missing:
        pytest.skip(f"names plugins that are not installed here: {sorted(missing)}")
    out = [] if "--out" in words else ["--out", str(tmp_path / "runs")]
    code = main([*words[1:], *out, "--dry-run"])
    assert code == 0, f"{doc}: `{' '.join(words)} --dry-run` exits {code}: {capsys.readouterr().err}"
