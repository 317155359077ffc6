"""benchmark/republish/acceptance.py: the fair-comparison issue's requirements, checked on records."""
from __future__ import annotations

import subprocess
import sys

from script_modules import BENCHMARK, load_script

TOOL = BENCHMARK / "republish" / "acceptance.py"
acceptance = load_script(TOOL)


def _record(model: str, task: str, task_params: dict, accuracy: float = 0.99, lr: float = 0.001,
            lr_grid: tuple = (0.00025, 0.001, 0.004), heads: int | None = None, parameters: int | None = 1000,
            trained: bool = True) -> dict:
    model_params = {"d": 64} if heads is None else {"d": 64, "heads": heads}
    return {"status": "ok", "task": task, "model": model, "metrics": {"accuracy": accuracy},
            "params": {"task": task_params, "model": model_params,
                       "train": {"lr": lr, "lr_grid": list(lr_grid)} if trained else {}},
            "size": None if parameters is None else {"parameters": parameters, "state": None}}


MQAR = [{"context_length": 64, "num_kv_pairs": 4}, {"context_length": 256, "num_kv_pairs": 16}]


def _passing() -> list[dict]:
    records = [_record("transformer-2l", "mqar", params, accuracy) for params in MQAR for accuracy in (0.98, 0.99)]
    records += [_record(model, "selective-copy", {"context_length": 256}) for model in acceptance.REQUIRED_MODELS]
    records += [_record("gru", "sparse-selection", {"num_tokens": 64}),
                _record("attn-alibi", "lag-walk", {"k": 4}, heads=4),
                _record("bayes-optimal", "mqar", MQAR[0], trained=False, parameters=None)]  # not trained: no size
    return records


def _holds(records: list[dict], scale: list[dict] = ()) -> dict[str, bool]:
    return {check.requirement: check.holds for check in acceptance.checks(records, scale)}


def test_records_that_meet_every_requirement_pass_every_check():
    assert all(_holds(_passing()).values())


def test_each_requirement_fails_on_the_records_that_miss_it():
    def failing(records: list[dict]) -> list[str]:
        return [name for name, holds in _holds(records).items() if not holds]

    base = _passing()
    unsized = [*base, _record("gru", "majority", {}, parameters=None)]
    assert failing(unsized) == ["every trained record carries a parameter count"]
    one_rate = [*base, _record("lstm", "majority", {}, lr_grid=())]
    assert failing(one_rate) == ["every (model, task family) pair tried at least 3 learning rates"]
    no_mamba = [r for r in base if r["model"] != "mamba"]
    assert failing(no_mamba) == ["mamba, transformer-4l, gla, h3 have trained records"]
    short = [r for r in base if not (r["task"] == "mqar" and r["params"]["task"]["context_length"] >= 256)]
    assert failing(short) == ["mqar records with context_length >= 256"]
    weak = [*base, _record("transformer-2l", "mqar", MQAR[0], accuracy=0.93)]  # that rung's mean: 0.967
    assert failing(weak) == ["transformer-2l's mean test accuracy >= 0.97 on every mqar rung"]
    one_head = [r for r in base if r["model"] != "attn-alibi"] + [_record("attn-alibi", "lag-walk", {"k": 4})]
    assert failing(one_head) == ["an attn-alibi record with more than one head"]


def test_the_larger_sizes_may_be_in_the_gpu_scale_section():
    base = _passing()
    moved = [r for r in base if r["task"] != "sparse-selection"]
    assert not _holds(moved)["sparse-selection records with num_tokens >= 64"]
    assert all(_holds(moved, scale=[_record("gru", "sparse-selection", {"num_tokens": 128})]).values())


def test_rates_count_across_a_pairs_records():
    """Three records of one pair, each at its own single rate, have tried three rates."""
    records = _passing() + [_record("lstm", "majority", {"context_length": c}, lr=lr, lr_grid=())
                             for c, lr in ((32, 0.001), (64, 0.003), (64, 0.012))]
    assert all(_holds(records).values())


def test_the_command_exits_1_and_names_what_is_missing(tmp_path):
    result = subprocess.run([sys.executable, str(TOOL), str(tmp_path)], capture_output=True, text=True)
    assert result.returncode == 1 and "missing: mamba, transformer-4l, gla, h3" in result.stdout
