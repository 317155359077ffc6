"""``tokbench new-task`` and ``new-model``: name checks, folder handling, complete packages, templates in the wheel."""
from __future__ import annotations

import math
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from tokbench.cli import main
from tokbench.commands.scaffold import Names, scaffold
from tokbench.plugins import registry

ROOT = Path(__file__).resolve().parents[1]


def new(capsys, *args: str) -> tuple[int, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out + captured.err


@pytest.mark.parametrize("name", ["9lives", "My-Task", "two words", "a--b", "trailing-", "_lead", "dots.no", "ünï"])
def test_refuses_a_name_that_is_not_an_identifier(capsys, tmp_path, name):
    code, output = new(capsys, "new-task", name, "--dir", str(tmp_path / "pkg"))
    assert code == 2
    assert "is not a valid identifier" in output and output.count("\n") == 1
    assert not (tmp_path / "pkg").exists()


@pytest.mark.parametrize(("kind", "name", "message"), [
    ("task", "random-walk", "task 'random-walk' is already registered"),
    ("model", "attn-paper-a", "model 'attn-paper-a' is already registered"),
    ("task", "walks", "a package named 'tokbench_walks' is already installed"),
])
def test_refuses_a_name_already_in_use(capsys, tmp_path, kind, name, message):
    code, output = new(capsys, f"new-{kind}", name, "--dir", str(tmp_path / "pkg"))
    assert code == 2 and message in output
    assert not (tmp_path / "pkg").exists()


def test_refuses_an_existing_folder_unless_forced(capsys, tmp_path):
    folder = tmp_path / "pkg"
    folder.mkdir()
    (folder / "NOTES.txt").write_text("mine")
    code, output = new(capsys, "new-task", "fresh-task", "--dir", str(folder))
    assert code == 2 and "already exists" in output and "--force" in output
    assert [p.name for p in folder.iterdir()] == ["NOTES.txt"]

    code, output = new(capsys, "new-task", "fresh-task", "--dir", str(folder), "--force")
    assert code == 0 and "pip install -e" in output
    assert (folder / "tokbench_fresh_task" / "task.py").is_file()
    assert (folder / "NOTES.txt").read_text() == "mine", "--force replaces generated files only"


def test_default_folder_is_named_after_the_distribution(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _ = new(capsys, "new-model", "my_head")
    assert code == 0 and (tmp_path / "tokbench-my_head" / "tokbench_my_head" / "model.py").is_file()


def test_distribution_and_package_names_are_chosen_in_one_place(capsys, tmp_path):
    code, output = new(capsys, "new-task", "lag-copy", "--dist", "my-selection-tasks", "--package", "selection_tasks",
                       "--dir", str(tmp_path / "pkg"))
    assert code == 0 and "package selection_tasks of distribution my-selection-tasks" in output
    project = tomllib.loads((tmp_path / "pkg" / "pyproject.toml").read_text())
    assert project["project"]["name"] == "my-selection-tasks"
    assert project["project"]["entry-points"]["tokbench"] == {"lag-copy": "selection_tasks"}  # the plugin's name
    assert project["tool"]["setuptools"]["packages"]["find"]["include"] == ["selection_tasks", "selection_tasks.*"]
    hooks = (tmp_path / "pkg" / "selection_tasks" / "__init__.py").read_text()
    assert 'implementation="selection_tasks.task:LagCopy"' in hooks
    for bad, message in (("--dist", "not a valid distribution name"), ("--package", "not a valid import package")):
        code, output = new(capsys, "new-task", "lag-copy", bad, "no good!", "--dir", str(tmp_path / "other"))
        assert code == 2 and message in output and output.count("\n") == 1


def test_generated_conftest_uses_one_thread_and_quiets_known_warnings(tmp_path):
    scaffold(Names("model", "quiet-head"), tmp_path / "pkg")
    conftest = (tmp_path / "pkg" / "tests" / "conftest.py").read_text()
    assert 'os.environ.setdefault("OMP_NUM_THREADS", "1")' in conftest and "does not have many workers" in conftest


@pytest.mark.parametrize(("kind", "name", "implementation"), [
    ("task", "first-token", "task.py"), ("model", "one-head", "model.py")])
def test_generates_a_complete_package(tmp_path, kind, name, implementation):
    names, folder = Names(kind, name), tmp_path / "pkg"
    written = scaffold(names, folder)
    relative = sorted(str(p.relative_to(folder)) for p in written)
    module = names.module
    test_file = "tests/test_task.py" if kind == "task" else "tests/test_model.py"
    assert relative == sorted(["README.md", "pyproject.toml", f"{module}/__init__.py", f"{module}/{implementation}",
                               "tests/conftest.py", "tests/test_conformance.py", test_file])
    for path in written:
        text = path.read_text()
        assert "${" not in text, f"unfilled placeholder in {path.name}"
        if path.suffix == ".py":
            compile(text, str(path), "exec")
    project = tomllib.loads((folder / "pyproject.toml").read_text())
    assert project["project"]["name"] == f"tokbench-{name}"
    assert project["project"]["entry-points"]["tokbench"] == {name: module}
    assert project["tool"]["setuptools"]["packages"]["find"]["include"] == [module, f"{module}.*"]
    assert f'{kind}s = ["{name}"]' in (folder / "tests/test_conformance.py").read_text()
    assert 'pytest_plugins = ["tokbench.testing"]' in (folder / "tests/conftest.py").read_text()


def test_generated_model_trains_with_the_harness(tmp_path, monkeypatch):
    """The model template is a working model, not a stub (the task template is run end to end elsewhere)."""
    import torch

    from tokbench.harness import predict, run_pairing

    names = Names("model", "probe-head")
    scaffold(names, tmp_path / "pkg")
    monkeypatch.syspath_prepend(str(tmp_path / "pkg"))
    spec = __import__(names.module).MODEL
    task = registry().task("random-walk").create({"p": 0.9, "context_length": 8, "train_size": 256,
                                                 "val_size": 64, "test_size": 256})
    result = run_pairing(task, spec, spec.resolve(), spec.recipe, seed=0, accelerator="cpu")
    assert all(math.isfinite(x) for x in result.curve["loss"])
    assert result.metrics["accuracy"] > 0.8, "learns the parent of a p = 0.9 walk (Bayes-optimal 0.9)"
    output = predict(spec.build(spec.resolve(), task), task.make_split("test", 0).tokens)
    assert output.logits.shape == (256, 6)
    assert torch.allclose(output.attention.sum(-1), torch.ones(256, 1, 1, 1))
    for module in [m for m in sys.modules if m.startswith(names.module)]:
        del sys.modules[module]


def test_templates_ship_in_the_wheel_and_the_qa_plugin_does_not(tmp_path):
    """A non-editable install carries the templates; plugins/tokbench-qa stays a distribution of its own."""
    source = tmp_path / "src"
    source.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "build")
    for part in ("pyproject.toml", "README.md", "benchmark", "plugins"):
        if (ROOT / part).is_dir():
            shutil.copytree(ROOT / part, source / part, ignore=ignore)
        elif (ROOT / part).exists():
            shutil.copy(ROOT / part, source / part)
        else:  # the README is optional for building
            (source / part).write_text("tokbench\n")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                    "--disable-pip-version-check", "-w", str(tmp_path / "wheel"), str(source)],
                   check=True, capture_output=True)
    (wheel,) = (tmp_path / "wheel").glob("tokbench-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    templates = ROOT / "benchmark" / "tokbench" / "templates"
    expected = {str(p.relative_to(ROOT / "benchmark")) for p in templates.rglob("*.tmpl")}
    assert expected and expected <= set(names)
    assert "tokbench/testing.py" in names and "tokbench/commands/scaffold.py" in names
    assert not [n for n in names if "tokbench_qa" in n or "tokbench-qa" in n]


def test_contributing_shows_the_generated_example(tmp_path):
    """CONTRIBUTING.md's complete example is the code `tokbench new-task first-token` writes (comments aside)."""
    guide = (ROOT / "CONTRIBUTING.md").read_text()
    example = guide.split("### A complete example", 1)[1].split("\n## ", 1)[0].split("\n### ", 1)[0]
    blocks = example.split("```python\n")[1:]
    assert len(blocks) == 2
    names = Names("task", "first-token")
    scaffold(names, tmp_path / "pkg")
    for block, module in zip(blocks, ("__init__.py", "task.py")):
        generated = (tmp_path / "pkg" / names.module / module).read_text()
        generated_lines = {line.split("  #")[0].rstrip() for line in generated.splitlines()}
        for line in block.split("```", 1)[0].splitlines():
            assert line.split("  #")[0].rstrip() in generated_lines, f"CONTRIBUTING.md line not in {module}: {line!r}"


def test_contributing_shows_the_generated_pyproject_and_disables_its_plugin_name(tmp_path):
    """CONTRIBUTING.md's pyproject.toml is what `tokbench new-task my-task` writes, and the plugin name it says to
    disable is the entry-point name written there."""
    guide = (ROOT / "CONTRIBUTING.md").read_text()
    example = guide.split("## How a plugin is packaged", 1)[1].split("```toml\n", 1)[1].split("```", 1)[0]
    scaffold(Names("task", "my-task"), tmp_path / "pkg")
    generated = tomllib.loads((tmp_path / "pkg" / "pyproject.toml").read_text())
    shown = tomllib.loads(example)
    assert shown["project"]["entry-points"] == generated["project"]["entry-points"] == {
        "tokbench": {"my-task": "tokbench_my_task"}}
    assert shown["tool"] == {"setuptools": generated["tool"]["setuptools"]}
    assert shown["project"]["dependencies"] == generated["project"]["dependencies"]
    assert "`TOKBENCH_DISABLE_PLUGINS=my-task`" in guide


def test_a_task_and_models_in_one_distribution(capsys, tmp_path):
    folder = tmp_path / "dist"
    assert new(capsys, "new-task", "lag-recall", "--dist", "my-selection", "--package", "selection",
               "--dir", str(folder))[0] == 0
    for model in ("lag-head", "lag-head-2"):
        code, output = new(capsys, "new-model", model, "--into", str(folder))
        assert code == 0 and f"entry point {model!r}" in output
    project = tomllib.loads((folder / "pyproject.toml").read_text())
    assert project["project"]["name"] == "my-selection"
    assert project["project"]["entry-points"]["tokbench"] == {
        "lag-recall": "selection", "lag-head": "selection.lag_head", "lag-head-2": "selection.lag_head_2"}
    hooks = (folder / "selection" / "lag_head" / "__init__.py").read_text()
    assert 'implementation="selection.lag_head.model:LagHead"' in hooks
    assert 'models = ["lag-head"]' in (folder / "tests" / "test_lag_head_conformance.py").read_text()
    assert (folder / "tests" / "test_lag_head.py").is_file() and (folder / "tests" / "test_conformance.py").is_file()
    for path in folder.rglob("*.py"):
        compile(path.read_text(), str(path), "exec")

    code, output = new(capsys, "new-model", "lag-head", "--into", str(folder))
    assert code == 2 and "lag_head" in output and output.count("\n") == 1  # already there
    code, output = new(capsys, "new-model", "other-head", "--into", str(folder), "--dir", str(tmp_path / "x"))
    assert code == 2 and "takes no --dir" in output
    code, output = new(capsys, "new-model", "other-head", "--into", str(tmp_path))
    assert code == 2 and "expected a plugin distribution" in output and output.count("\n") == 1
