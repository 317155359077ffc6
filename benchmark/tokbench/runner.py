"""Run a grid: skip finished pairings, execute the rest, write one run record each.

Three executors run pairings: in this process (one job), in a pool of local
worker processes, or as Ray tasks on a cluster. Local workers write their own
records atomically, so killing the parent loses nothing that finished; a Ray
task returns its record and the driver writes it, so a cluster without a shared
file system works too. A pairing that raises, or whose loss becomes
non-finite, gets a failed record with its error, and the grid goes on.
"""
from __future__ import annotations

import logging
import multiprocessing
import os
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any, Protocol

from tokbench.grid import Pairing
from tokbench.results import SCHEMA_VERSION, clean, provenance, round_floats, write_record

RERUN_MODES = ("missing", "failed", "all")
EXECUTORS = ("local", "ray")
Record = dict[str, Any]


def usable_cores() -> int:
    """CPU cores this process may use (respects affinity masks and container CPU sets)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def plan(pairings: Sequence[Pairing], existing: Mapping[str, Record], rerun: str) -> list[Pairing]:
    """The pairings to run: without a record (``missing``), also failed ones (``failed``), or all."""
    def wanted(pairing: Pairing) -> bool:
        record = existing.get(pairing.config_hash)
        return rerun == "all" or record is None or (rerun == "failed" and record["status"] == "failed")
    return [p for p in pairings if wanted(p)]


# ---- one pairing -> one record -------------------------------------------------------------------------------------

def error_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def build_record(pairing: Pairing, prov: Mapping[str, Any], *, error: str | None = None, eval_split: str = "test",
                 metrics: Mapping[str, Any] | None = None, train: Mapping[str, Any] | None = None,
                 curve: Mapping[str, list] | None = None, profile: list[float] | None = None,
                 diagnostics: Mapping[str, Any] | None = None) -> Record:
    """A schema-v1 record; ``error`` set means status failed."""
    task, model = pairing.task_spec, pairing.model_spec
    return {
        "schema_version": SCHEMA_VERSION,
        **clean(pairing.header),
        "status": "failed" if error else "ok",
        "error": error,
        "eval_split": eval_split,
        "metrics": clean(dict(metrics or {})),
        "train": clean(dict(train or {})),
        "curve": {k: round_floats(list(v)) for k, v in (curve or {}).items()},
        "attention_profile": round_floats(profile) if profile is not None else None,
        "diagnostics": clean(dict(diagnostics or {})),
        "meta": {"task_description": task.description, "task_citation": task.citation,
                 "model_description": model.description, "model_citation": model.citation,
                 "recipe": pairing.recipe.describe()},
        "provenance": dict(prov),
    }


def execute(pairing: Pairing, commit: str | None) -> Record:
    """Train and evaluate one pairing; any exception becomes a failed record."""
    from tokbench.harness import run_pairing

    prov = provenance(commit)
    started = time.perf_counter()
    eval_split = "test"  # the task's own split once it is built
    try:
        task = pairing.task_spec.create(pairing.task_params)
        eval_split = task.eval_split
        result = run_pairing(task, pairing.model_spec, pairing.model_params, pairing.recipe, pairing.seed)
        record = build_record(pairing, prov, eval_split=eval_split, metrics=result.metrics, train=result.train,
                              curve=result.curve, profile=result.attention_profile, diagnostics=result.diagnostics)
        if record["metrics"].get("accuracy") is None:
            raise ValueError(f"accuracy is not finite: {result.metrics.get('accuracy')}")
        return record
    except Exception as exc:  # noqa: BLE001 - one bad pairing must not sink the grid
        train = {**pairing.recipe.to_json(), "wall_seconds": time.perf_counter() - started}
        return build_record(pairing, prov, error=error_line(exc), eval_split=eval_split, train=train)


def failed_record(pairing: Pairing, commit: str | None, error: str) -> Record:
    """The record of a pairing whose worker died or could not report back."""
    return build_record(pairing, provenance(commit), error=error, train=pairing.recipe.to_json())


def _set_threads(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)


def _execute_and_write(pairing: Pairing, commit: str | None, out_dir: Path) -> Record:
    record = execute(pairing, commit)
    write_record(out_dir, record)
    return record


def _exit_with_parent(parent: int) -> None:
    """A worker whose parent was killed stops at once instead of training on as an orphan."""
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(1)


def _init_worker(threads: int, parent: int) -> None:
    _set_threads(threads)
    threading.Thread(target=_exit_with_parent, args=(parent,), daemon=True).start()


def _execute_on_ray(pairing: Pairing, commit: str | None) -> Record:
    _set_threads(1)  # each Ray task holds one CPU
    return execute(pairing, commit)


# ---- executors -------------------------------------------------------------------------------------------------------

class Executor(Protocol):
    """Runs pairings; ``wait`` blocks until at least one finished and returns each with its written record."""

    def capacity(self) -> int: ...
    def submit(self, pairing: Pairing) -> None: ...
    def wait(self) -> list[tuple[Pairing, Record]]: ...
    def close(self, abort: bool) -> None: ...


class InProcessExecutor:
    """One pairing at a time in this process: no start-up cost, easy to debug."""

    def __init__(self, out_dir: Path, commit: str | None, threads: int) -> None:
        self.out_dir, self.commit, self.threads = out_dir, commit, threads
        self.pending: deque[Pairing] = deque()

    def capacity(self) -> int:
        return 1

    def submit(self, pairing: Pairing) -> None:
        self.pending.append(pairing)

    def wait(self) -> list[tuple[Pairing, Record]]:
        _set_threads(self.threads)
        pairing = self.pending.popleft()
        return [(pairing, _execute_and_write(pairing, self.commit, self.out_dir))]

    def close(self, abort: bool) -> None:
        self.pending.clear()


class PoolExecutor:
    """Local worker processes (spawned: forking after torch is imported is unsafe), each with its torch threads."""

    def __init__(self, out_dir: Path, commit: str | None, jobs: int, threads: int) -> None:
        self.out_dir, self.commit, self.jobs, self.threads = out_dir, commit, jobs, threads
        self.futures: dict[Future, Pairing] = {}
        self.pool = self._new_pool()

    def _new_pool(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(self.jobs, mp_context=multiprocessing.get_context("spawn"),
                                   initializer=_init_worker, initargs=(self.threads, os.getpid()))

    def capacity(self) -> int:
        return self.jobs

    def submit(self, pairing: Pairing) -> None:
        self.futures[self.pool.submit(_execute_and_write, pairing, self.commit, self.out_dir)] = pairing

    def wait(self) -> list[tuple[Pairing, Record]]:
        done, _ = wait(self.futures, return_when=FIRST_COMPLETED)
        finished, broken = [], False
        for future in done:
            pairing = self.futures.pop(future)
            try:
                record = future.result()
            except BrokenProcessPool:
                # Every pairing in flight fails with the pool; the one that killed it cannot be told apart.
                broken = True
                record = self._record_failure(pairing, "worker process died (killed, out of memory or crashed)")
            except Exception as exc:  # noqa: BLE001 - e.g. a record that could not be written
                record = self._record_failure(pairing, error_line(exc))
            finished.append((pairing, record))
        if broken:
            self.pool.shutdown(wait=False, cancel_futures=True)
            self.pool = self._new_pool()
        return finished

    def _record_failure(self, pairing: Pairing, error: str) -> Record:
        record = failed_record(pairing, self.commit, error)
        write_record(self.out_dir, record)
        return record

    def close(self, abort: bool) -> None:
        self.pool.shutdown(wait=not abort, cancel_futures=True)


class RayExecutor:
    """Ray tasks of one CPU each on the cluster at ``address``, or on a local Ray instance started here."""

    def __init__(self, out_dir: Path, commit: str | None, address: str | None) -> None:
        try:
            import ray
        except ImportError:
            from tokbench.errors import UsageError

            raise UsageError("--executor ray needs Ray: pip install 'tokbench[ray]'") from None
        self.ray, self.out_dir, self.commit = ray, out_dir, commit
        self.started_here = not ray.is_initialized()
        local = {} if address else {"include_dashboard": False}
        ray.init(address=address, ignore_reinit_error=True, log_to_driver=False, logging_level=logging.WARNING, **local)
        self.remote = ray.remote(num_cpus=1, max_retries=0)(_execute_on_ray)
        self.refs: dict[Any, Pairing] = {}

    def capacity(self) -> int:
        return max(1, int(self.ray.cluster_resources().get("CPU", 1)))  # re-read: clusters grow and shrink

    def submit(self, pairing: Pairing) -> None:
        self.refs[self.remote.remote(pairing, self.commit)] = pairing

    def wait(self) -> list[tuple[Pairing, Record]]:
        ready, _ = self.ray.wait(list(self.refs), num_returns=1)
        finished = []
        for ref in ready:
            pairing = self.refs.pop(ref)
            try:
                record = self.ray.get(ref)
            except Exception as exc:  # noqa: BLE001 - a lost node or worker fails this pairing only
                record = failed_record(pairing, self.commit, error_line(exc))
            write_record(self.out_dir, record)
            finished.append((pairing, record))
        return finished

    def close(self, abort: bool) -> None:
        for ref in self.refs if abort else ():
            self.ray.cancel(ref, force=True)
        if self.started_here:
            self.ray.shutdown()


def make_executor(kind: str, out_dir: Path, commit: str | None, jobs: int, pending: int,
                  ray_address: str | None = None) -> Executor:
    """The executor for ``kind``; local runs use at most ``jobs`` workers and split the cores between them."""
    if kind == "ray":
        return RayExecutor(out_dir, commit, ray_address)
    workers = max(1, min(jobs, pending))
    threads = max(1, usable_cores() // workers)
    if workers == 1:
        return InProcessExecutor(out_dir, commit, threads)
    return PoolExecutor(out_dir, commit, workers, threads)


class Progress(Protocol):
    def started(self, pairing: Pairing) -> None: ...
    def finished(self, pairing: Pairing, record: Record) -> None: ...


def run_grid(pairings: Sequence[Pairing], executor: Executor, progress: Progress) -> list[Record]:
    """Run every pairing, at most ``executor.capacity()`` at a time; returns the records in finishing order.

    Pairings are handed out one by one as slots free up, so what is in flight is
    exactly what is running, and a killed run leaves no long queue behind.
    """
    queue, in_flight, produced = deque(pairings), 0, []
    try:
        while queue or in_flight:
            while queue and in_flight < executor.capacity():
                pairing = queue.popleft()
                executor.submit(pairing)
                progress.started(pairing)
                in_flight += 1
            for pairing, record in executor.wait():
                in_flight -= 1
                progress.finished(pairing, record)
                produced.append(record)
    except BaseException:
        executor.close(abort=True)
        raise
    executor.close(abort=False)
    return produced
