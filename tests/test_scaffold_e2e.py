"""The contributor's whole path, for real: scaffold a task, pip-install it, list it, run it, run its tests."""
from __future__ import annotations

import json

from conftest import run_cli
from plugin_install import installed

NAME = "e2e-recall"
SMALL = ("--set", "task.train_size=64", "--set", "task.val_size=64", "--set", "task.test_size=64",
         "--set", "train.steps=2")


def test_scaffold_install_list_run_and_test(tmp_path):
    package = tmp_path / "package"
    created = run_cli("new-task", NAME, "--dir", str(package))
    assert created.returncode == 0, created.stderr

    with installed(package, f"tokbench-{NAME}", tmp_path / "env") as env:
        listing = env.tokbench("ls", "tasks", "--json")
        assert listing.returncode == 0, listing.stderr
        (spec,) = [s for s in json.loads(listing.stdout) if s["name"] == NAME]
        assert spec["plugin"] == f"tokbench-{NAME}"

        out = tmp_path / "runs"
        run = env.tokbench("run", "--task", NAME, "--model", "attn-paper-a", "--seeds", "1", *SMALL,
                           "--out", str(out), "--jobs", "1", "--quiet")
        assert run.returncode == 0, run.stdout + run.stderr
        (path,) = out.glob(f"{NAME}__attn-paper-a__*.json")
        record = json.loads(path.read_text())
        assert record["status"] == "ok" and record["task_version"] == "1"
        assert record["train"]["steps"] == 2 and len(record["curve"]["loss"]) == 2
        assert record["metrics"]["bayes_accuracy"] == 1 - 0.2 + 0.2 / 8  # the template's defaults
        assert 0 <= record["metrics"]["accuracy"] <= 1 and "first_token_attention" in record["metrics"]

        tests = env.run("-m", "pytest", "-q", "-p", "no:cacheprovider", cwd=package, timeout=600)
        assert tests.returncode == 0, tests.stdout[-3000:] + tests.stderr[-2000:]
        assert " passed" in tests.stdout and "failed" not in tests.stdout

    listing = env.tokbench("ls", "tasks", "--json")
    assert NAME not in {s["name"] for s in json.loads(listing.stdout)}, "uninstalled on the way out"


def test_a_task_and_a_model_in_one_distribution_install_and_pass_the_kit(tmp_path):
    package, task, model = tmp_path / "package", "dist-recall", "dist-head"
    assert run_cli("new-task", task, "--dist", "tokbench-dist-pair", "--dir", str(package)).returncode == 0
    added = run_cli("new-model", model, "--into", str(package))
    assert added.returncode == 0, added.stderr

    with installed(package, "tokbench-dist-pair", tmp_path / "env") as env:
        plugins = {p["name"]: p for p in json.loads(env.tokbench("plugins", "--json").stdout)}
        assert plugins[task]["distribution"] == plugins[model]["distribution"] == "tokbench-dist-pair"
        assert plugins[task]["tasks"] == [task] and plugins[model]["models"] == [model]
        shown = json.loads(env.tokbench("show", "model", f"{model}:{model}", "--json").stdout)
        assert shown["qualified_name"] == f"{model}:{model}"

        out = tmp_path / "runs"
        run = env.tokbench("run", "--task", task, "--model", model, "--seeds", "1", *SMALL, "--out", str(out),
                           "--jobs", "1", "--quiet")
        assert run.returncode == 0, run.stdout + run.stderr
        (path,) = out.glob(f"{task}__{model}__*.json")
        assert json.loads(path.read_text())["status"] == "ok"

        tests = env.run("-m", "pytest", "-q", "-p", "no:cacheprovider", "--tokbench-task", task,
                        "--tokbench-model", model, cwd=package, timeout=600)
        assert tests.returncode == 0, tests.stdout[-3000:] + tests.stderr[-2000:]
        assert " passed" in tests.stdout and "failed" not in tests.stdout
