"""The plugin host through real entry points: isolation, validation, allow/block lists."""
from __future__ import annotations

import json


def test_builtins_arrive_through_the_entry_point_group(cli):
    plugins = json.loads(cli("plugins", "--json").stdout)
    by_name = {p["name"]: p for p in plugins}
    assert by_name["walks"]["tasks"] == ["random-walk", "deterministic-walk"]
    assert by_name["walks"]["status"] == "ok" and by_name["walks"]["hooks"] == ["register_tasks"]
    assert "attn-paper-a" in by_name["attention"]["models"]
    assert all(p["distribution"] == "tokbench" for p in by_name.values())


def test_broken_import_is_isolated_and_reported(cli, plugin_site):
    env = plugin_site(broken="broken_import")
    listing = cli("ls", "tasks", "--json", env=env)
    assert listing.returncode == 0
    assert {"random-walk", "deterministic-walk"} <= {t["name"] for t in json.loads(listing.stdout)}
    warnings = [line for line in listing.stderr.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "'broken'" in warnings[0] and "broken on purpose" in warnings[0]

    report = cli("plugins", "--json", env=env)
    assert report.returncode == 0
    broken = next(p for p in json.loads(report.stdout) if p["name"] == "broken")
    assert broken["status"] == "error"
    assert broken["distribution"] == "tokbench-fake-plugins"
    assert "RuntimeError: this plugin is broken on purpose" in broken["error"]


def test_raising_hook_is_isolated_and_reported(cli, plugin_site):
    env = plugin_site(badhook="broken_hook")
    listing = cli("ls", "tasks", env=env)
    assert listing.returncode == 0 and "random-walk" in listing.stdout
    broken = next(p for p in json.loads(cli("plugins", "--json", env=env).stdout) if p["name"] == "badhook")
    assert broken["status"] == "error" and "register_tasks failed: ValueError" in broken["error"]


def test_unknown_hook_is_named_with_a_suggestion(cli, plugin_site):
    result = cli("ls", "tasks", env=plugin_site(typo="misspelled_hook"))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert "'typo'" in result.stderr and "register_task" in result.stderr
    assert "did you mean 'register_tasks'" in result.stderr


def test_duplicate_task_name_names_both_plugins(cli, plugin_site):
    result = cli("ls", "tasks", env=plugin_site(clash="duplicate_task"))
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "'random-walk'" in result.stderr and "'walks'" in result.stderr and "'clash'" in result.stderr


def test_block_list_hides_a_plugin(cli):
    names = {t["name"] for t in json.loads(cli("ls", "tasks", "--json", env={"TOKBENCH_DISABLE_PLUGINS": "walks"}).stdout)}
    assert "random-walk" not in names
    report = json.loads(cli("plugins", "--json", env={"TOKBENCH_DISABLE_PLUGINS": "walks"}).stdout)
    assert next(p for p in report if p["name"] == "walks")["status"] == "disabled"


def test_allow_list_keeps_only_the_named_plugins(cli):
    env = {"TOKBENCH_PLUGINS": "walks"}
    tasks = {t["name"] for t in json.loads(cli("ls", "tasks", "--json", env=env).stdout)}
    models = json.loads(cli("ls", "models", "--json", env=env).stdout)
    assert {"random-walk", "deterministic-walk"} <= tasks and models == []


def test_block_list_is_the_way_out_of_a_broken_plugin(cli, plugin_site):
    env = {**plugin_site(typo="misspelled_hook"), "TOKBENCH_DISABLE_PLUGINS": "typo"}
    assert cli("ls", "tasks", env=env).returncode == 0
