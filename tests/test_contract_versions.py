"""The versioned contract. A plugin written for contract 1 (tests/fake_plugins/contract_v1*.py, kept exactly as
its author wrote it) runs through the adapter of tokbench.compat, which warns once per change to make; a plugin
declaring a contract this tokbench does not serve is refused at load in one line."""
from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from tokbench import compat
from tokbench.compat import ContractWarning
from tokbench.harness import run_pairing
from tokbench.hookspecs import CONTRACT
from tokbench.plugins import registry

sys.path.insert(0, str(Path(__file__).parent / "fake_plugins"))
import contract_v1  # noqa: E402 - the contract-1 plugin's hook module, importable from its folder

TINY = {"train_size": 64, "val_size": 32, "test_size": 64}
SIZES = [arg for key, value in TINY.items() for arg in ("--set", f"{key}={value}")]


@pytest.fixture
def fresh_warnings(monkeypatch):
    monkeypatch.setattr(compat, "_warned", set())


def test_the_contract_number_and_the_package_version_move_together():
    from tokbench import __version__

    major, minor = (int(part) for part in __version__.split(".")[:2])
    assert CONTRACT == 2 and (major, minor) >= (0, 2)  # contract 2 broke contract-1 plugins: a new minor pre-1.0
    assert all(getattr(__import__(p.module), "TOKBENCH_CONTRACT", None) == CONTRACT for p in registry().plugins)


def test_a_contract_1_pairing_is_adapted_with_one_warning_per_change(fresh_warnings):
    task = replace(contract_v1.FIRST_TOKEN, contract=1).create(TINY)
    spec = replace(contract_v1.ONE_QUERY, contract=1)
    recipe = spec.recipe.override({"steps": 20})
    with pytest.warns(ContractWarning) as caught:
        result = run_pairing(task, spec, spec.resolve(), recipe, seed=0, accelerator="cpu")
        run_pairing(task, spec, spec.resolve(), recipe, seed=1, accelerator="cpu")
    messages = [str(w.message) for w in caught if issubclass(w.category, ContractWarning)]
    for change in ("lacks need_attention", "are plain masks", "model_metrics is given contract-1 attention"):
        assert sum(change in m for m in messages) == 1, (change, messages)
    assert all("CONTRIBUTING.md#migrating-to-contract-2" in m for m in messages)
    # the task's own metric on contract-1 attention equals the host's metric of the same target: never silently wrong
    m = result.metrics
    assert 0.0 < m["first_token_mass"] <= 1.0
    assert m["first_token_mass"] == pytest.approx(m["first_token_attention"], abs=1e-6)


def test_a_contract_1_task_reads_a_contract_2_model_through_the_view(fresh_warnings):
    task = replace(contract_v1.FIRST_TOKEN, contract=1).create(TINY)
    spec = registry().model("attn-rope")
    with pytest.warns(ContractWarning):
        result = run_pairing(task, spec, spec.resolve(), spec.recipe.override({"steps": 5}), seed=0, accelerator="cpu")
    assert result.metrics["first_token_mass"] == pytest.approx(result.metrics["first_token_attention"], abs=1e-6)


def test_a_contract_2_spec_is_not_adapted():
    task = contract_v1.FIRST_TOKEN.create(TINY)  # contract 2 claimed: the plain masks stay as they are
    assert not hasattr(task.make_split("test", 0).attention_targets["first_token_attention"], "weights")


def test_the_contract_1_plugin_runs_end_to_end(cli, plugin_site, tmp_path):
    env = plugin_site(old="contract_v1")
    out = tmp_path / "runs"
    result = cli("run", "--task", "first-token-v1", "--model", "one-query-v1", "attn-rope", "--seeds", "1", *SIZES,
                 "--set", "train.steps=20", "--out", str(out), "-q", env=env)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    notes = [line for line in result.stderr.splitlines() if "declares no TOKBENCH_CONTRACT" in line]
    assert len(notes) == 1 and "'old'" in notes[0] and "CONTRIBUTING.md#migrating-to-contract-2" in notes[0]
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
