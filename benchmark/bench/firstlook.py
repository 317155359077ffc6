"""Benchmark section for the first look: a plain `tokbench run` (the default suite), timed as a user runs it.

One `tokbench run` process from start to end (imports, worker start-up, every pairing, the summary), into a
fresh records folder, with the default --jobs (the usable cores). The target is 3 minutes on 2 cores at a
moderate load; the figure depends on that load, which is printed beside it. The records then say where the
workers' time went: the task x model blocks that took the largest shares, so a size to cut shows up here.
--quick runs one seed per pairing.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

TARGET_SECONDS = 180.0
SHOWN = 3  # the largest task x model blocks named


def first_look(out: Path, quick: bool = False) -> tuple[float, list[dict]]:
    """Wall seconds of one `tokbench run` of the default suite into ``out``, and the records it wrote."""
    args = [sys.executable, "-m", "tokbench.cli", "run", "--out", str(out), "-q", *(["--seeds", "1"] if quick else [])]
    start = time.perf_counter()
    done = subprocess.run(args, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"tokbench run failed ({done.returncode}): {done.stderr[-2000:]}")
    return seconds, [json.loads(path.read_text()) for path in sorted(out.glob("*.json"))]


def shares(records: list[dict]) -> list[tuple[str, float]]:
    """Each task x model block's share of the records' worker seconds, largest first."""
    spent: Counter[str] = Counter()
    for record in records:
        spent[f"{record['task']} x {record['model']}"] += (record.get("train") or {}).get("wall_seconds") or 0.0
    total = sum(spent.values()) or 1.0
    return [(block, seconds / total) for block, seconds in spent.most_common()]


def run(quick: bool) -> list[tuple[str, float, str]]:
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        seconds, records = first_look(Path(tmp) / "runs", quick)
    after = os.getloadavg()[0]
    worker = sum((r.get("train") or {}).get("wall_seconds") or 0.0 for r in records)
    top = ", ".join(f"{block} {share:.0%}" for block, share in shares(records)[:SHOWN])
    suite = "first look (default suite" + (", 1 seed)" if quick else ")")
    return [
        (f"{suite}: wall seconds of `tokbench run`", seconds,
         f"{len(records)} records; target < {TARGET_SECONDS:.0f} s on 2 cores; load average {load:.1f} before, "
         f"{after:.1f} after; {os.cpu_count()} cores"),
        (f"{suite}: worker seconds in the records", worker, f"largest blocks: {top}"),
    ]
