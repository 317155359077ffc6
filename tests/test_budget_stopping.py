"""benchmark/budget/stopping.py: pairing protocol runs with their runs to the cap, and the share within tolerance."""
from __future__ import annotations

import subprocess
import sys

import pytest

from script_modules import BUDGET, load_script
from tokbench.results import load_records

TOOL = BUDGET / "stopping.py"
stopping = load_script(TOOL)


def _record(model: str, seed: int, accuracy: float, target: float, steps: int, why: str) -> dict:
    train = {"lr": 0.001, "steps": 10000, "target": target, "eval_every": 100}
    return {"status": "ok", "task": "mqar", "model": model, "seed": seed, "config_hash": f"{model}{seed}{target}",
            "params": {"task": {"context_length": 64}, "model": {"d": 64}, "train": train},
            "metrics": {"accuracy": accuracy}, "train": {"steps": steps, "stopped_because": why},
            "ladder": {"axes": {"context_length": 64}}}


def test_pairs_match_on_everything_but_the_stop_and_measure_the_gain():
    records = [_record("gru", 0, 0.25, 0.995, 10000, "cap"), _record("gru", 0, 0.25, 0.0, 10000, "cap"),
               _record("transformer-2l", 0, 0.990, 0.995, 2100, "target"),
               _record("transformer-2l", 0, 0.999, 0.0, 10000, "cap"),
               _record("transformer-2l", 1, 0.95, 0.995, 3000, "target"),
               _record("transformer-2l", 1, 0.99, 0.0, 10000, "cap"),
               _record("h3", 0, 0.5, 0.995, 10000, "cap"),  # stopped at the cap: its own cap run
               _record("h3", 1, 0.6, 0.995, 2000, "target"),  # stopped early, no cap run yet
               _record("gla", 0, 0.4, 0.995, 10000, "cap"),  # its own cap run: nothing pending
               _record("mlp", 0, 0.3, 0.0, 10000, "cap"),  # a cap run without its protocol run
               _record("attn-alibi", 0, 0.80, 0.995, 500, "target"),  # the cap run ends lower: no loss to the stop
               _record("attn-alibi", 0, 0.78, 0.0, 10000, "cap")]
    matched, unmatched = stopping.pairs(records)
    assert [(p.model, p.seed, round(p.gain, 3), p.rerun) for p in matched] == [
        ("attn-alibi", 0, -0.02, True), ("gla", 0, 0.0, False), ("gru", 0, 0.0, True), ("h3", 0, 0.0, False),
        ("transformer-2l", 0, 0.009, True), ("transformer-2l", 1, 0.04, True)]
    assert unmatched == ["mqar x h3 seed 1: no cap run", "mqar x mlp seed 0: no protocol run"]
    rows = {row[0]: row[1:] for row in stopping.summary(matched, 0.01)}
    assert rows["target"][:2] == [3, 1] and rows["cap"][:2] == [1, 1] and rows["cap (same run)"][:2] == [2, 2]
    assert rows["all"][:2] == [6, 4] and rows["all"][3] == max(p.gain for p in matched)
    assert rows["all"][4] == 5  # one-sided: only the pair that gains 0.04 lost more than 0.01 to the stop
    assert stopping.pending(records) == {"h3": ["mqar"]}  # not gla: its run reached the cap


def test_a_second_run_on_one_side_is_refused_not_paired_with_itself():
    patience = _record("gru", 0, 0.25, 0.0, 3000, "plateau")
    patience["params"]["train"]["patience"] = 5
    rerun = _record("gru", 0, 0.26, 0.0, 10000, "cap")  # --set train.target=0 alone: still a patience run
    rerun["params"]["train"]["patience"] = 5
    with pytest.raises(ValueError, match="train.patience=0"):
        stopping.pairs([patience, rerun])


def test_a_gain_of_exactly_the_tolerance_counts_as_within_it():
    records = [_record("attn-t5bias", 0, 0.783, 0.995, 300, "target"),
               _record("attn-t5bias", 0, 0.793, 0.0, 10000, "cap")]
    matched, _ = stopping.pairs(records)
    assert matched[0].gain > 0.01  # 0.010000000000000009 in floats: 20 of 2000 test sequences
    assert stopping.summary(matched, 0.01)[-1][:3] == ["all", 1, 1]


def test_the_tables_in_the_budget_readme_are_what_the_tool_prints_on_the_committed_records():
    printed = subprocess.run([sys.executable, str(TOOL), str(TOOL.parent / "stopping-records"), "--markdown"],
                             capture_output=True, text=True, check=True).stdout
    assert printed.strip() and printed.strip() in (TOOL.parent / "README.md").read_text()


def test_the_committed_check_trains_at_least_50_pairs_to_the_cap_and_95_percent_end_within_001():
    """The fair-comparison issue's bar, on the committed records: the protocol's stop loses at most 0.01 in at least
    95% of the sampled pairs (a pair is a protocol run and the same run trained to the cap)."""
    plan = stopping.plan_hashes(TOOL.parent / "stopping.toml")  # as the tool pairs them: the suite's runs
    matched, _ = stopping.pairs(load_records(TOOL.parent / "stopping-records").records.values(), plan)
    (_, pairs, within, share, *_), = [row for row in stopping.summary(matched, 0.01) if row[0] == "all"]
    assert pairs >= 50 and share >= 0.95, f"{within} of {pairs} pairs within 0.01"


def test_with_the_suites_plan_its_pairings_are_the_protocol_and_a_stop_it_dropped_is_not_paired():
    """A family the suite trains to the cap (target 0) has protocol runs that are their own cap runs; a record with a
    stop the suite no longer plans is named, not paired; a record outside the plan with no stop is a run to the cap."""
    to_cap = _record("gru", 0, 0.89, 0.0, 10000, "cap")  # the suite's run: target 0 on this family
    dropped = _record("gru", 0, 0.88, 0.995, 4000, "target")  # the same pairing under the stop it used to have
    stopped = _record("mlp", 0, 0.95, 0.995, 3000, "target")
    rerun = _record("mlp", 0, 0.96, 0.0, 10000, "cap")
    plan = {to_cap["config_hash"], stopped["config_hash"]}
    matched, unmatched = stopping.pairs([to_cap, dropped, stopped, rerun], plan)
    assert [(p.model, p.protocol, p.cap, p.rerun) for p in matched] == [("gru", 0.89, 0.89, False),
                                                                           ("mlp", 0.95, 0.96, True)]
    assert unmatched == ["mqar x gru seed 0: a stop the suite does not plan (target 0.995, patience 0)"]
    assert stopping.pending([to_cap, stopped], plan) == {"mlp": ["mqar"]}


def test_a_record_of_another_model_version_is_not_the_same_run():
    protocol = _record("gru", 0, 0.25, 0.995, 4000, "target")
    cap = {**_record("gru", 0, 0.45, 0.0, 10000, "cap"), "model_version": "2"}
    matched, unmatched = stopping.pairs([protocol, cap])
    assert matched == [] and len(unmatched) == 2


def test_runs_on_a_gpu_and_on_a_cpu_are_never_one_pair_and_pending_can_ask_for_one_device():
    """A GPU's kernels and a CPU's round differently: a pair across them would measure the devices, not the stop."""
    on_cpu = {**_record("gru", 0, 0.25, 0.995, 4000, "target"), "provenance": {"device": "cpu"}}
    on_gpu = {**_record("gru", 0, 0.26, 0.0, 10000, "cap"), "provenance": {"device": "cuda (NVIDIA H100 80GB HBM3)"}}
    matched, unmatched = stopping.pairs([on_cpu, on_gpu])
    assert matched == [] and len(unmatched) == 2
    assert stopping.pending([on_cpu]) == stopping.pending([on_cpu], device="cpu") == {"gru": ["mqar"]}
    assert stopping.pending([on_cpu], device="cuda") == {}

