"""Side-by-side timing helpers shared by the benchmark sections."""
from __future__ import annotations

import statistics
import subprocess
import time
from collections.abc import Callable


def median_seconds(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def compare(a: Callable[[], object], b: Callable[[], object], repeats: int) -> tuple[float, float]:
    """Median seconds of ``a`` and ``b``, run alternately so both see the same machine load."""
    a(), b()  # warm-up: imports, allocator, first-call dispatch
    times_a, times_b = [], []
    for _ in range(repeats):
        times_a.append(median_seconds(a, 1))
        times_b.append(median_seconds(b, 1))
    return statistics.median(times_a), statistics.median(times_b)


def process_seconds(args: list[str]) -> float:
    """Wall seconds of one process ``args`` from start to exit; raises with its stderr's end if it fails."""
    start = time.perf_counter()
    done = subprocess.run(args, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:6])} ... failed ({done.returncode}): {done.stderr[-2000:]}")
    return seconds
