"""The versioned contract. A plugin written for contract 1 (tests/fake_plugins/contract_v1*.py, kept exactly as
its author wrote it) runs through the wrappers of tokbench.compat, which leave the plugin's own objects as they were
created (its own code and tests keep seeing contract 1); the parent process of a run says once, before training,
what to change; a plugin declaring a contract this tokbench does not serve is refused at load in one line."""
from __future__ import annotations

import copy
import inspect
import json
import os
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from tokbench.compat import ContractOneModel, ContractOneTask, adapt_model, adapt_task, contract_notes
from tokbench.grid import Pairing
from tokbench.harness import run_pairing, train_model
from tokbench.hookspecs import CONTRACT
from tokbench.plugins import registry
from tokbench.task import AttentionTarget

sys.path.insert(0, str(Path(__file__).parent / "fake_plugins"))
import contract_v1  # noqa: E402 - the contract-1 plugin's hook module, importable from its folder
import contract_v1_impl  # noqa: E402

TINY = {"train_size": 64, "val_size": 32, "test_size": 64}
SIZES = [arg for key, value in TINY.items() for arg in ("--set", f"{key}={value}")]
# what the host registers for the plugin: its specs, with the contract its hook module declares (none: 1)
OLD = {"contract": 1, "entry_point": "old", "plugin": "tokbench-fake-plugins"}
TASK, MODEL = replace(contract_v1.FIRST_TOKEN, **OLD), replace(contract_v1.ONE_QUERY, **OLD)


def test_the_contract_number_and_the_package_version_move_together():
    from tokbench import __version__

    major, minor = (int(part) for part in __version__.split(".")[:2])
    assert CONTRACT == 2 and (major, minor) >= (0, 2)  # contract 2 broke contract-1 plugins: a new minor pre-1.0
    assert all(getattr(__import__(p.module), "TOKBENCH_CONTRACT", None) == CONTRACT for p in registry().plugins)


def test_a_contract_1_pairing_trains_through_the_wrappers_and_scores_as_its_own_metric():
    task = TASK.create(TINY)
    result = run_pairing(task, MODEL, MODEL.resolve(), MODEL.recipe.override({"steps": 20}), seed=0, accelerator="cpu")
    # the task's own metric on contract-1 attention equals the host's metric of the same target: never silently wrong
    m = result.metrics
    assert 0.0 < m["first_token_mass"] <= 1.0
    assert m["first_token_mass"] == pytest.approx(m["first_token_attention"], abs=1e-6)
    assert result.diagnostics["first_token_attention"] == {"kind": "mass", "layer": "last", "head": "mean"}


def test_the_plugins_own_objects_still_see_contract_1_after_the_harness_trained_them():
    task = TASK.create(TINY)  # as the plugin's own tests create it: registry().task(name).create(...)
    assert type(task) is contract_v1_impl.FirstTokenV1
    created = dict(vars(task))
    recipe = MODEL.recipe.override({"steps": 20})
    run_pairing(task, MODEL, MODEL.resolve(), recipe, seed=0, accelerator="cpu")
    wrapper, _, steps = train_model(task, MODEL, MODEL.resolve(), recipe, 0, task.make_split("train", 0), None, "cpu")
    assert steps == 20 and vars(task) == created  # nothing set on the task, nothing replaced

    # what the plugin's own tests, written for contract 1, check: generate draws plain (n, T) masks ...
    split = task.generate(5, torch.Generator().manual_seed(0))
    mask = split.attention_targets["first_token_attention"]
    assert type(mask) is torch.Tensor and mask.dtype == torch.bool and mask.shape == (5, 8)
    assert type(task.make_split("test", 0).attention_targets["first_token_attention"]) is torch.Tensor
    # ... its model, the one the harness trained, is its own class with its own forward(tokens) ...
    model = wrapper.plugin
    assert type(model) is contract_v1_impl.OneQueryV1 and "forward" not in vars(model)
    output = model(split.tokens)
    assert output.logits.shape == (5, 6) and output.attention.shape == (5, 8)
    # ... and its own model_metrics reads that model as contract 1
    with torch.no_grad():  # as the harness calls it
        own = task.model_metrics(model, split)
    assert set(own) == {"first_token_mass"} and 0.0 <= own["first_token_mass"] <= 1.0


def test_a_contract_1_model_is_built_from_its_contract_1_tasks_own_object(monkeypatch):
    seen = []
    original = contract_v1_impl.OneQueryV1.__init__
    monkeypatch.setattr(contract_v1_impl.OneQueryV1, "__init__",
                        lambda self, params, task: seen.append(task) or original(self, params, task))
    task = TASK.create(TINY)
    train_model(task, MODEL, MODEL.resolve(), MODEL.recipe.override({"steps": 2}), 0, task.make_split("train", 0),
                None, "cpu")
    assert seen and all(built is task for built in seen)  # not the host's ContractOneTask around it


def test_the_model_wrapper_is_the_plugins_module_for_training():
    task = adapt_task(TASK.create(TINY))
    torch.manual_seed(0)
    model = MODEL.build(MODEL.resolve(), task)
    wrapper = adapt_model(model, MODEL)
    assert isinstance(wrapper, ContractOneModel) and wrapper.plugin is model and adapt_model(wrapper, MODEL) is wrapper
    assert [id(p) for p in wrapper.parameters()] == [id(p) for p in model.parameters()]
    assert wrapper.state_dict().keys() == {f"plugin.{key}" for key in model.state_dict()}
    assert wrapper.size() == model.size() and wrapper.vocab_size == 6 and wrapper.params == model.params
    assert wrapper.to("cpu") is wrapper and wrapper.eval() is wrapper and not model.training
    tokens = task.make_split("test", 0).tokens
    # the shapes the contract note quotes: (n, T + S) from forward(tokens), read as (n, 1, 1, 1, T + S)
    assert model(tokens).attention.shape == (64, 8)
    assert wrapper(tokens, need_attention=True).attention.shape == (64, 1, 1, 1, 8)
    assert wrapper(tokens).attention is None
    copied = copy.deepcopy(wrapper)  # a replica's own copy: its own plugin module
    assert copied.plugin is not model and torch.equal(copied.plugin.query, model.query)
    fresh = MODEL.build(MODEL.resolve(), task)
    fresh.load_state_dict(wrapper.plugin.state_dict())  # weights trained through the wrapper load into its own model
    assert torch.equal(fresh(tokens).logits, model(tokens).logits)


def test_a_contract_1_task_reads_a_contract_2_model_through_the_view():
    task = TASK.create(TINY)
    spec = registry().model("attn-rope")
    result = run_pairing(task, spec, spec.resolve(), spec.recipe.override({"steps": 5}), seed=0, accelerator="cpu")
    assert result.metrics["first_token_mass"] == pytest.approx(result.metrics["first_token_attention"], abs=1e-6)


def test_the_contract_notes_name_the_plugin_its_file_and_the_shapes_converted():
    recipe = MODEL.recipe.override({"steps": 1})
    pairings = [Pairing.of(TASK, model, TASK.resolve(TINY), model.resolve(), recipe, seed)
                for model in (MODEL, registry().model("attn-rope")) for seed in (0, 1)]
    notes = contract_notes(pairings)
    assert len(notes) == 3  # once per change, however many pairings share it
    source = inspect.getsourcefile(contract_v1_impl.FirstTokenV1)
    forward, targets, metrics = (next(n for n in notes if what in n) for what in (
        "lacks need_attention", "plain (n, T) masks", "model_metrics is handed"))
    for note in notes:
        assert note.startswith("plugin 'old' (tokbench-fake-plugins), contract 1: ") and source in note
        assert note.endswith("see CONTRIBUTING.md#migrating-to-contract-2") and "\n" not in note
    assert "model one-query-v1 (OneQueryV1 in " in forward and "task first-token-v1 (FirstTokenV1 in " in targets
    assert "(n, T + S), is read as (n, 1, 1, 1, T + S)" in forward and "(n, L, H, Q, T + S)" in forward
    assert "first_token_attention" in targets
    assert "logits (n, V)" in metrics and "attention (n, T + S)" in metrics
    assert contract_notes([Pairing.of(registry().task("random-walk"), registry().model("attn-rope"),
                                      {}, {}, recipe, 0)]) == []


def test_a_contract_2_spec_is_not_adapted():
    task = contract_v1.FIRST_TOKEN.create(TINY)  # contract 2 claimed: the plain masks stay as they are
    assert adapt_task(task) is task
    assert not hasattr(task.make_split("test", 0).attention_targets["first_token_attention"], "weights")
    hosted = adapt_task(TASK.create(TINY))
    assert isinstance(hosted, ContractOneTask) and adapt_task(hosted) is hosted
    assert isinstance(hosted.make_split("test", 0).attention_targets["first_token_attention"], AttentionTarget)


def test_the_contract_1_plugin_runs_end_to_end(cli, plugin_site, tmp_path):
    env = plugin_site(old="contract_v1")
    out = tmp_path / "runs"
    result = cli("run", "--task", "first-token-v1", "--model", "one-query-v1", "attn-rope", "--seeds", "1", *SIZES,
                 "--set", "train.steps=20", "--out", str(out), "-q", "--jobs", "2", env=env)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    notes = [line for line in result.stderr.splitlines() if "declares no TOKBENCH_CONTRACT" in line]
    assert len(notes) == 1 and "'old'" in notes[0] and "CONTRIBUTING.md#migrating-to-contract-2" in notes[0]
    # each change said once, by the parent, before training, in the project's one-line form (two workers said
    # each of them in Python's file:line form before)
    output = result.stdout + result.stderr
    changes = [line for line in result.stderr.splitlines() if "contract 1: " in line]
    source = str(tmp_path / "site" / "contract_v1_impl.py")
    for change in ("lacks need_attention", "plain (n, T) masks", "model_metrics is handed"):
        lines = [line for line in changes if change in line]
        assert len(lines) == 1 and output.count(change) == 1, (change, output[-3000:])
        assert lines[0].startswith("tokbench: warning: plugin 'old' (tokbench-fake-plugins), contract 1: ")
        assert source in lines[0]
    assert result.stderr.index("contract 1: ") < result.stderr.index("pairings to run")
    assert "Warning" not in output and not re.search(r"\.py:\d+: ", output)
    records = {r["model"]: r for r in (json.loads(p.read_text()) for p in out.glob("*.json"))}
    assert set(records) == {"one-query-v1", "attn-rope"}
    for record in records.values():
        assert record["status"] == "ok", record.get("error")
        m = record["metrics"]
        assert m["first_token_mass"] == pytest.approx(m["first_token_attention"], abs=1e-4)


def test_a_newer_contract_is_refused_at_load_in_one_line(cli, plugin_site):
    env = plugin_site(future="contract_future")
    listing = cli("ls", "tasks", env=env)
    assert listing.returncode == 0 and "random-walk" in listing.stdout
    warnings = [line for line in listing.stderr.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "'future'" in warnings[0] and "contract 3" in warnings[0]
    report = json.loads(cli("plugins", "--json", env=env).stdout)
    future = next(p for p in report if p["name"] == "future")
    assert future["status"] == "error" and "upgrade tokbench" in future["error"] and "\n" not in future["error"]


def test_the_plugins_table_shows_each_contract_and_marks_the_adapted(cli, plugin_site):
    listing = cli("plugins", env={**plugin_site(old="contract_v1"), "COLUMNS": "250"})
    assert listing.returncode == 0
    rows = {line.split("│")[1].strip(): line for line in listing.stdout.splitlines() if line.startswith("│")}
    assert "│ 1 (adapted) " in rows["old"] and "│ 2 " in rows["walks"]


API_RUN = """
import json, sys, warnings
from tokbench import api
from tokbench.compat import ContractWarning
if __name__ == "__main__":  # the workers import this script again (docs/api.md)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        records = api.run(["first-token-v1"], ["one-query-v1"], seeds=2, out=sys.argv[1],
                          settings=["train_size=64", "val_size=32", "test_size=64", "train.steps=5"])
    print(json.dumps({"statuses": [r["status"] for r in records],
                      "warnings": [[w.category.__name__, str(w.message), w.filename] for w in caught
                                   if issubclass(w.category, ContractWarning)]}))
"""


def test_api_run_issues_one_contract_warning_per_change_pointing_at_the_caller(plugin_site, tmp_path):
    """The Python API's path: the same notes as the CLI's, as ContractWarnings (one per change, however many
    pairings share it), attributed to the caller's line, not to torch or tokbench."""
    env = dict(os.environ, **plugin_site(old="contract_v1"))
    script = tmp_path / "caller.py"
    script.write_text(API_RUN, encoding="utf-8")
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "runs")], capture_output=True, text=True,
                          env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["statuses"] == ["ok", "ok"]
    caught = result["warnings"]
    for change in ("lacks need_attention", "plain (n, T) masks", "model_metrics is handed"):
        assert sum(change in message for _, message, _ in caught) == 1, (change, caught)
    assert len(caught) == 3
    assert all(category == "ContractWarning" and filename == str(script) for category, _, filename in caught)
    assert all(message.startswith("plugin 'old' (tokbench-fake-plugins), contract 1: ") for _, message, _ in caught)
