"""The GPU benchmark's entry runs end to end on a CPU with --quick and reports every figure it promises."""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from script_modules import load_script

GPU_BENCH = Path(__file__).resolve().parents[1] / "benchmark" / "bench" / "gpu.py"


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    """One ``gpu.py --quick`` run on the CPU for the module: its figures (the JSON) and its stdout."""
    folder = tmp_path_factory.mktemp("gpu")
    out = folder / "gpu.json"
    done = subprocess.run([sys.executable, str(GPU_BENCH), "--quick", "--json", str(out)], capture_output=True,
                          text=True, cwd=folder)
    assert done.returncode == 0, done.stderr[-2000:]
    return {**json.loads(out.read_text()), "stdout": done.stdout}


def test_gpu_benchmark_quick_runs_on_a_cpu_and_reports_its_ratios_and_projection(quick):
    figures = quick
    assert figures["device"] == "no GPU: the GPU side ran on the CPU"
    names = [row[0] for row in figures["rows"]]
    assert names[0].startswith("replicas together / one by one, transformer-2l")
    assert "GPU / CPU per step, transformer-2l" in names
    assert any(name.startswith("projected tokbench suite on one GPU") for name in names)
    assert all(math.isfinite(value) and value >= 0 for _, value, _ in figures["rows"])
    assert "gpu.py took" in figures["stdout"]


def test_gpu_benchmark_quick_measures_the_overhead_per_step_of_a_stack(quick):
    """Issue 31 item 2: data drawn per step against a training step, batched evaluation against one by one, and
    torch.compile of the stack's step against eager, each a finite positive ratio, the compiled step checked equal."""
    rows = {name: (value, note) for name, value, note in quick["rows"]}
    expected = ("fresh data / training step, stack of 2 transformer-2l",
                "evaluation batched / one by one, stack of 2 transformer-2l",
                "torch.compile (mode=default, backend=aot_eager) / eager, forward and backward of a stack of 2 "
                "transformer-2l")
    for name in expected:
        assert name in rows, sorted(rows)
        value, _ = rows[name]
        assert math.isfinite(value) and value > 0, (name, value)
    assert "accuracies the same" in rows[expected[1]][1]
    assert "losses, logits and gradients equal eager's within 0.0001" in rows[expected[2]][1]
    assert "compile and warm-up" in rows[expected[2]][1]
    assert not any(name.startswith("step overhead: parts not measured") for name in rows)


def test_step_overhead_section_starts_a_part_only_with_the_seconds_it_needs_and_names_what_it_left_out(monkeypatch):
    """On a GPU (faked): data and evaluation first, then a compile per mode while 60 s (then 1.5 x the last compile's
    seconds + 10) are left; what did not start is named."""
    from types import SimpleNamespace

    import torch

    overhead = load_script(GPU_BENCH.with_name("overhead.py"))  # the benchmark's own module, beside gpu.py

    started = []
    monkeypatch.setattr(overhead, "build", lambda *args: None)
    monkeypatch.setattr(overhead, "data", lambda stack, repeats: (("data", 0.1, ""), 0.01))
    monkeypatch.setattr(overhead, "evaluation", lambda stack, repeats, step: ("evaluation", 0.5, ""))
    monkeypatch.setattr(overhead, "compiled", lambda stack, mode, *args: (started.append(mode) or
                                                                          ((f"compile {mode}", 0.5, ""), 40.0)))
    seconds = iter([200, 200, 65, 60])  # at the start, before evaluation, before each compile
    rows = []
    pairing = SimpleNamespace(recipe=SimpleNamespace(batch_size=64))
    left_out = overhead.run(pairing, torch.device("cuda"), False, lambda: next(seconds), rows.append)
    assert started == ["reduce-overhead"]
    assert [row[0] for row in rows] == ["data", "evaluation", "compile reduce-overhead"]
    assert left_out == ["torch.compile mode=default (needs about 70 s, 60 s left)"]
    seconds = iter([20])
    assert overhead.run(pairing, torch.device("cpu"), False, lambda: next(seconds), rows.append) == [
        "the whole section (data, evaluation, torch.compile)"]
