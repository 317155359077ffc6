"""The GPU benchmark's entry runs end to end on a CPU with --quick and reports every figure it promises."""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

GPU_BENCH = Path(__file__).resolve().parents[1] / "benchmark" / "bench" / "gpu.py"


def test_gpu_benchmark_quick_runs_on_a_cpu_and_reports_its_ratios_and_projection(tmp_path):
    out = tmp_path / "gpu.json"
    done = subprocess.run([sys.executable, str(GPU_BENCH), "--quick", "--json", str(out)], capture_output=True,
                          text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    figures = json.loads(out.read_text())
    assert figures["device"] == "no GPU: the GPU side ran on the CPU"
    names = [row[0] for row in figures["rows"]]
    assert names[0].startswith("replicas together / one by one, transformer-2l")
    assert "GPU / CPU per step, transformer-2l" in names
    assert any(name.startswith("projected tokbench suite on one GPU") for name in names)
    assert all(math.isfinite(value) and value >= 0 for _, value, _ in figures["rows"])
    assert "gpu.py took" in done.stdout
