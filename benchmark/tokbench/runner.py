"""Run a grid: skip finished pairings, execute the rest, write one run record each.

Two executors run pairings: local worker processes (:mod:`tokbench.isolation`,
used at every ``--jobs``, one included) or Ray tasks on a cluster. Local workers
write their own records atomically, so killing the parent loses nothing that
finished; a Ray task returns its record and the driver writes it, so a cluster
without a shared file system works too. Whatever one pairing does (raise, exit,
crash, hang past ``--timeout``) gives it a failed record and the grid goes on.
A pairing that is not applicable gets its record without training. Each pairing
trains under a per-pairing lock (:mod:`tokbench.locks`).

With ``cells``, a worker (or Ray task) takes a whole cell, the pairings that differ only
in the seed, and trains them as one stack (:mod:`tokbench.cells`); every promise above
holds per pairing: each is locked, recorded and shown on its own, a pairing that another
run holds or recorded leaves the cell, and ``--timeout`` scales with the cell's size.
"""
from __future__ import annotations

import logging
import os
import socket
import time
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from tokbench.cells import group, time_limit
from tokbench.errors import StorageError, UsageError
from tokbench.grid import Pairing
from tokbench.isolation import LocalExecutor, execute_cell, set_threads, trainer_provenance
from tokbench.locks import PairingLocks
from tokbench.outcome import Failure, Outcome, error_line, record_of
from tokbench.results import utc_now, write_record

RERUN_MODES = ("missing", "failed", "all")
EXECUTORS = ("local", "ray")
DEFAULT_THREADS = 1  # torch intra-op threads per pairing: the numbers do not depend on --jobs or the machine
LOCK_POLL_SECONDS = 0.2
RAY_CONNECT_SECONDS = 10.0
Record = dict[str, Any]


def usable_cores() -> int:
    """CPU cores this process may use (respects affinity masks and container CPU sets)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def plan(pairings: Sequence[Pairing], existing: Mapping[str, Record], rerun: str) -> list[Pairing]:
    """The pairings to run: without a record (``missing``), also failed ones (``failed``), or all.

    A pairing that failed for the environment (its task's or model's module could
    not be imported) counts as missing: after a ``pip install`` a plain rerun retries it.
    """
    def wanted(pairing: Pairing) -> bool:
        record = existing.get(pairing.config_hash)
        if record is None or rerun == "all":
            return True
        environment = (record.get("failure") or {}).get("phase") == "environment"
        return record["status"] == "failed" and (rerun == "failed" or environment)
    return [p for p in pairings if wanted(p)]


def place_on_ladders(pairings: Sequence[Pairing], records: Mapping[str, Record], out: Path) -> int:
    """Write each planned pairing's rung (``ladder``) into its record in ``out`` where the record places it
    elsewhere or nowhere; returns how many were rewritten (atomically). A rung is not part of a pairing's identity, so
    a record another suite trained with the same identity (the pruning check's sweeps are the tokbench suite's
    middle rungs) is this suite's record, and the leaderboard reads its rung from it."""
    from tokbench.results import write_record

    placed = 0
    for pairing in pairings:
        record = records.get(pairing.config_hash)
        rung = pairing.variant.rung
        if record is not None and rung is not None and record.get("ladder") != rung.to_json():
            record["ladder"] = rung.to_json()
            write_record(out, record)
            placed += 1
    return placed


# ---- executors -------------------------------------------------------------------------------------------------------

class Executor(Protocol):
    """Runs cells of pairings (one pairing, or several that differ only in the seed), ``capacity()`` cells at a
    time; ``wait`` blocks until at least one pairing finished and returns each with its written record."""

    def capacity(self) -> int: ...
    def submit(self, *pairings: Pairing) -> None: ...
    def wait(self) -> list[tuple[Pairing, Record]]: ...
    def provenance(self) -> Mapping[str, Any]: ...
    def close(self, abort: bool) -> None: ...


def _execute_on_ray(pairings: Sequence[Pairing], commit: str | None) -> list[Record]:
    set_threads(DEFAULT_THREADS)  # each Ray task holds one CPU
    return list(execute_cell(pairings, trainer_provenance(commit, DEFAULT_THREADS)))


def check_ray_address(address: str) -> None:
    """Fail at once, in one line, on an address that is malformed or where nothing listens."""
    if address == "auto":
        return
    host, colon, port = address.removeprefix("ray://").rpartition(":")
    if not colon or not host or not port.isdigit():
        raise UsageError(f"--ray-address expects HOST:PORT, ray://HOST:PORT or auto, got {address!r}")
    try:
        socket.create_connection((host, int(port)), timeout=RAY_CONNECT_SECONDS).close()
    except OSError as exc:
        raise StorageError(f"--ray-address {address}",
                           f"no Ray cluster reachable there ({exc.strerror or exc})") from None


class RayExecutor:
    """Ray tasks of one CPU each on the cluster at ``address``, or on a local Ray instance started here."""

    def __init__(self, out_dir: Path, commit: str | None, address: str | None, timeout: float | None) -> None:
        try:
            import ray
        except ImportError:
            raise UsageError("--executor ray needs Ray: pip install 'tokbench[ray]'") from None
        if address:
            check_ray_address(address)
        self.ray, self.out_dir, self.commit, self.timeout = ray, out_dir, commit, timeout
        self.started_here = not ray.is_initialized()
        local = {} if address else {"include_dashboard": False}
        try:
            ray.init(address=address, ignore_reinit_error=True, log_to_driver=False, logging_level=logging.WARNING,
                     **local)
        except (ConnectionError, RuntimeError) as exc:
            raise StorageError(f"--ray-address {address or '(local)'}", error_line(exc)) from None
        self.remote = ray.remote(num_cpus=1, max_retries=0)(_execute_on_ray)
        self.refs: dict[Any, tuple[Sequence[Pairing], str, float]] = {}
        self._prov: dict[str, Any] | None = None

    def capacity(self) -> int:
        return max(1, int(self.ray.cluster_resources().get("CPU", 1)))  # re-read: clusters grow and shrink

    def submit(self, *pairings: Pairing) -> None:
        self.refs[self.remote.remote(pairings, self.commit)] = (pairings, utc_now(), time.perf_counter())

    def provenance(self) -> Mapping[str, Any]:
        if self._prov is None:
            self._prov = trainer_provenance(self.commit, DEFAULT_THREADS)
        return self._prov

    def wait(self) -> list[tuple[Pairing, Record]]:
        while True:
            limits = {ref: time_limit(self.timeout, len(pairings)) for ref, (pairings, _, _) in self.refs.items()
                      } if self.timeout is not None else {}
            deadlines = {ref: self.refs[ref][2] + limit for ref, (limit, _) in limits.items()}
            remaining = max(0.0, min(deadlines.values()) - time.perf_counter()) if deadlines else None
            ready, _ = self.ray.wait(list(self.refs), num_returns=1, timeout=remaining)
            finished = [done for ref in ready for done in self._finished(ref)]
            for ref, deadline in deadlines.items():
                if ref in self.refs and time.perf_counter() >= deadline:
                    self.ray.cancel(ref, force=True)
                    finished += self._failed(ref, Failure("timeout"), limits[ref][1])
            if finished:
                return finished

    def _finished(self, ref: Any) -> list[tuple[Pairing, Record]]:
        try:
            records = self.ray.get(ref)
        except Exception as exc:  # noqa: BLE001 - a lost node or worker fails this cell only
            return self._failed(ref, Failure("worker"), error_line(exc))
        pairings, _, _ = self.refs.pop(ref)
        for record in records:
            write_record(self.out_dir, record)
        return list(zip(pairings, records))

    def _failed(self, ref: Any, failure: Failure, error: str) -> list[tuple[Pairing, Record]]:
        pairings, started_at, clock = self.refs.pop(ref)
        outcome = Outcome(started_at, time.perf_counter() - clock, error=error, failure=failure)
        records = [record_of(pairing, outcome, self.provenance()) for pairing in pairings]
        for record in records:
            write_record(self.out_dir, record)
        return list(zip(pairings, records))

    def close(self, abort: bool) -> None:
        for ref in self.refs if abort else ():
            self.ray.cancel(ref, force=True)
        if self.started_here:
            self.ray.shutdown()


def make_executor(kind: str, out_dir: Path, commit: str | None, jobs: int, pending: int,
                  threads: int = DEFAULT_THREADS, timeout: float | None = None,
                  ray_address: str | None = None) -> Executor:
    """The executor for ``kind``; local runs use at most ``jobs`` workers of ``threads`` torch threads each."""
    if kind == "ray":
        return RayExecutor(out_dir, commit, ray_address, timeout)
    return LocalExecutor(out_dir, commit, max(1, min(jobs, pending)), threads, timeout)


# ---- the grid --------------------------------------------------------------------------------------------------------

class Progress(Protocol):
    def started(self, pairing: Pairing) -> None: ...
    def finished(self, pairing: Pairing, record: Record) -> None: ...
    def taken(self, pairing: Pairing, record: Record) -> None: ...


def run_grid(pairings: Sequence[Pairing], executor: Executor, progress: Progress,
             locks: PairingLocks, cells: bool = False) -> list[Record]:
    """Run every pairing, at most ``executor.capacity()`` cells at a time; returns the records in finishing order.

    A cell is one pairing, or with ``cells`` the pairings that differ only in the seed (:func:`tokbench.cells.group`),
    trained together in one worker. Cells are handed out one by one as slots free up, so what is in flight is
    exactly what is running, and a killed run leaves no long queue behind. A pairing that another run is
    training waits (with the others of its cell that wait); one that another run recorded meanwhile is not
    trained again.
    """
    queue, in_flight, produced = deque(group(pairings, cells)), 0, []
    unfinished: dict[str, set[str]] = {}  # a pairing in flight -> the config hashes of its cell still in flight

    def finish(pairing: Pairing, record: Record) -> None:
        locks.release(pairing)
        progress.finished(pairing, record)
        produced.append(record)

    try:
        while queue or in_flight:
            waiting = []
            while queue and in_flight < executor.capacity():
                claimed, busy = [], []
                for pairing in queue.popleft():
                    claim = locks.claim(pairing)
                    reason = pairing.not_applicable
                    if claim.state == "busy":
                        busy.append(pairing)
                    elif claim.state == "taken":
                        assert claim.record is not None
                        progress.taken(pairing, claim.record)
                        produced.append(claim.record)
                    elif reason is not None:
                        outcome = Outcome(utc_now(), 0.0, not_applicable=reason)
                        finish(pairing, _written(locks.out_dir, record_of(pairing, outcome, executor.provenance())))
                    else:
                        claimed.append(pairing)
                if busy:
                    waiting.append(busy)
                if claimed:
                    executor.submit(*claimed)
                    in_flight += 1
                    cell = {p.config_hash for p in claimed}
                    for pairing in claimed:
                        progress.started(pairing)
                        unfinished[pairing.config_hash] = cell
            queue.extendleft(reversed(waiting))
            if in_flight:
                for pairing, record in executor.wait():
                    cell = unfinished.pop(pairing.config_hash)
                    cell.discard(pairing.config_hash)
                    in_flight -= not cell
                    finish(pairing, record)
            elif queue:
                time.sleep(LOCK_POLL_SECONDS)  # every pairing left is being trained by another run
    except BaseException:
        executor.close(abort=True)
        raise
    finally:
        locks.release_all()
    executor.close(abort=False)
    return produced


def _written(out_dir: Path, record: Record) -> Record:
    write_record(out_dir, record)
    return record
