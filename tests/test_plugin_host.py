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


def test_a_plugin_reusing_a_built_in_task_name_gets_the_qualified_name(cli, plugin_site):
    env = plugin_site(clash="duplicate_task")
    listing = cli("ls", "tasks", "--json", env=env)
    assert listing.returncode == 0, listing.stderr
    names = {t["name"]: t for t in json.loads(listing.stdout)}
    assert {"random-walk", "clash:random-walk", "deterministic-walk"} <= names.keys()
    assert names["random-walk"]["plugin"] == "tokbench" and names["clash:random-walk"]["version"] == "9"
    notes = [line for line in listing.stderr.splitlines() if "warning" in line]
    assert len(notes) == 1 and "'clash'" in notes[0] and "'clash:random-walk'" in notes[0]
    bare = cli("show", "task", "random-walk", "--json", env=env)
    assert bare.returncode == 0 and json.loads(bare.stdout)["plugin"] == "tokbench"
    qualified = cli("show", "task", "clash:random-walk", "--json", env=env)
    assert qualified.returncode == 0 and json.loads(qualified.stdout)["version"] == "9"


def test_a_name_that_only_plugins_share_is_ambiguous_only_where_it_is_used(cli, plugin_site):
    env = plugin_site(one="shared_model", two="shared_model_twin")
    models = cli("ls", "models", "--json", env=env)
    assert models.returncode == 0, models.stderr
    names = {m["name"] for m in json.loads(models.stdout)}
    assert {"one:shared-guess", "two:shared-guess"} <= names and "shared-guess" not in names
    bare = cli("show", "model", "shared-guess", env=env)
    assert bare.returncode == 2 and bare.stderr.count("\n") == 1 and "Traceback" not in bare.stderr
    assert "ambiguous" in bare.stderr and "one:shared-guess" in bare.stderr and "two:shared-guess" in bare.stderr
    assert cli("show", "model", "two:shared-guess", env=env).returncode == 0


def test_a_plugin_reusing_a_model_name_breaks_no_command(cli, plugin_site):
    env = plugin_site(dup="duplicate_model")
    models = cli("ls", "models", env=env)
    assert models.returncode == 0, models.stderr
    names = [line.split("│")[1].strip() for line in models.stdout.splitlines() if line.count("│") > 2]
    listed = [name for name in names if name.endswith("linear-attention")]  # not gla, which names it
    assert sorted(listed) == ["dup:linear-attention", "linear-attention"]
    plugins = cli("plugins", env=env)
    assert plugins.returncode == 0, plugins.stderr
    assert "dup:linear-attention" in plugins.stdout and "models:linear-attention" not in plugins.stdout
    assert cli("ls", "tasks", env=env).returncode == 0


def test_every_spec_answers_to_its_qualified_name(cli):
    shown = json.loads(cli("show", "model", "attention:attn-rope", "--json").stdout)
    assert shown["name"] == "attn-rope" and shown["qualified_name"] == "attention:attn-rope"


def test_a_run_and_a_suite_take_qualified_names(cli, tmp_path):
    suite = tmp_path / "qualified.toml"
    suite.write_text('description = "q"\nseeds = 1\n[[grid]]\ntasks = ["walks:random-walk"]\n'
                     'models = ["attention:attn-rope", "uniform"]\n')
    plans = {"suite": cli("run", "--suite", str(suite), "--out", str(tmp_path / "a"), "--dry-run", "-q"),
             "filters": cli("run", "--suite", str(suite), "--task", "walks:random-walk", "--model",
                            "attention:attn-rope", "--out", str(tmp_path / "b"), "--dry-run", "-q")}
    for result in plans.values():
        assert result.returncode == 0, result.stderr
    assert "random-walk × attn-rope seed 0" in plans["suite"].stdout and "× uniform" in plans["suite"].stdout
    assert "random-walk × attn-rope seed 0" in plans["filters"].stdout and "× uniform" not in plans["filters"].stdout


def test_unknown_plugin_names_in_the_lists_are_warned_about(cli):
    for variable in ("TOKBENCH_DISABLE_PLUGINS", "TOKBENCH_PLUGINS"):
        result = cli("plugins", env={variable: "walks,tokbench_walkz"})
        assert result.returncode == 0
        warnings = [line for line in result.stderr.splitlines() if "warning" in line]
        assert len(warnings) == 1 and variable in warnings[0] and "'tokbench_walkz'" in warnings[0]
        assert "walks" in warnings[0].split("shows:")[1]  # the names it would accept


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
