"""The command line's contract: listings, JSON shape, one-line errors with exit code 2, light start-up."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tokbench import __version__


def test_help_and_version(cli):
    help_text = cli("--help")
    assert help_text.returncode == 0
    for command in ("ls", "plugins", "show", "run", "leaderboard"):
        assert command in help_text.stdout
    assert cli("--version").stdout.strip() == f"tokbench {__version__}"


@pytest.mark.parametrize("what", ["tasks", "models"])
def test_ls_json_entries_carry_the_documented_keys(cli, what):
    result = cli("ls", what, "--json")
    assert result.returncode == 0
    entries = json.loads(result.stdout)
    assert entries
    for entry in entries:
        assert {"name", "version", "description", "citation", "params", "plugin"} <= set(entry)
        for param in entry["params"]:
            assert {"name", "type", "default", "low", "high", "choices"} <= set(param)


def test_plugins_json_lists_hooks_registrations_and_errors(cli):
    result = cli("plugins", "--json")
    assert result.returncode == 0
    plugins = {plugin["name"]: plugin for plugin in json.loads(result.stdout)}
    for plugin in plugins.values():
        assert {"name", "version", "hooks", "tasks", "models", "error", "status"} <= set(plugin)
    walks = next(plugin for name, plugin in plugins.items() if "random-walk" in plugin["tasks"])
    assert "register_tasks" in walks["hooks"] and walks["error"] is None


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["show", "task", "random-wlk"], "unknown task 'random-wlk' (did you mean 'random-walk'"),
        (["show", "model", "attn-papr-a"], "unknown model 'attn-papr-a' (did you mean 'attn-paper-a'"),
        (["show", "task", "random-walk", "--set", "pp=0.3"], "has no parameter 'pp' (did you mean 'p'?)"),
        (["show", "task", "random-walk", "--set", "p=1.5"], "p=1.5 is out of range; allowed: float in [0.0, 1.0]"),
        (["show", "task", "random-walk", "--set", "K=six"], "K='six' is not a valid int"),
        (["show", "task", "random-walk", "--set", "K"], "--set expects key=value"),
        (["ls", "nodes"], "invalid choice: 'nodes'"),
    ],
)
def test_user_errors_are_one_line_with_exit_code_2(cli, args, expected):
    result = cli(*args)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert expected in result.stderr


@pytest.mark.parametrize("args", [["--help"], ["ls", "tasks"], ["ls", "models", "--json"], ["plugins"]])
def test_light_commands_do_not_import_torch_or_lightning(args):
    code = (
        "import sys\n"
        "from tokbench.cli import main\n"
        f"try:\n    code = main({args!r})\nexcept SystemExit as exit:\n    code = exit.code\n"
        "heavy = sorted(m for m in ('torch', 'pytorch_lightning', 'lightning', 'matplotlib') if m in sys.modules)\n"
        "print(f'CODE={code or 0} HEAVY=' + ','.join(heavy), file=sys.stderr)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "CODE=0 HEAVY=\n" in result.stderr  # the command succeeded, and without the heavy imports
    assert result.stdout.strip()
