"""Issue #32, smaller items: a plugin's KeyboardInterrupt or a huge contract value is one plugin's failure, reported
in one short line, and every command goes on."""
from __future__ import annotations

import pytest


@pytest.mark.parametrize("command", [["ls", "tasks"], ["plugins"]])
def test_a_hook_raising_keyboard_interrupt_fails_that_plugin_only(cli, plugin_site, tmp_path, command):
    """Before, `ls` and `plugins` exited 130 listing nothing."""
    done = cli(*command, env=plugin_site(interrupting="hook_interrupt"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "random-walk" in done.stdout or "walks" in done.stdout
    assert "raised KeyboardInterrupt" in done.stdout + done.stderr and "Traceback" not in done.stderr


def test_a_huge_contract_value_is_not_printed_in_full(cli, plugin_site, tmp_path):
    """Before, a 3 MB TOKBENCH_CONTRACT value was printed in full by every command."""
    done = cli("ls", "tasks", env=plugin_site(huge="contract_huge"), cwd=tmp_path)
    assert done.returncode == 0 and "random-walk" in done.stdout
    assert "is not a contract number" in done.stderr and len(done.stderr) < 1000, len(done.stderr)
