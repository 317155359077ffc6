"""Local execution with every pairing isolated in a worker process, at any ``--jobs``, one included.

A worker runs pairings one at a time: it trains, writes the record atomically
itself (so killing the parent loses nothing that finished), then reports back.
Nothing a pairing does can stop the grid or the parent: an exception or
``sys.exit`` becomes a failed record in the worker; a worker that dies
(``os._exit``, a segfault, the OOM killer) or overruns ``--timeout`` is
replaced, and the parent writes the failed record with the exit status, the
signal or the time limit. If the worker wrote its record before it died, that
record stands: the parent never writes over a record a worker finished. A stop
(Ctrl+C, or SIGTERM to the parent, its process group or a worker) ends the workers
and leaves no record for the pairings they held, never a failed one: a plain
rerun trains them.

A worker may be handed a cell (:mod:`tokbench.cells`: pairings that differ only in the
seed, trained together); all of the above then holds per pairing: it writes and reports
each record as it is ready, a raised error fails only its own pairings, and a worker that
dies or overruns the cell's time limit (``--timeout`` x the cell's pairings) gives failed
records to the pairings it had not finished, a stop no record.

Workers fork from a server process that imported torch once (``forkserver``),
so a crashed worker is replaced in milliseconds and ``--jobs N`` pays the
import once; where fork is unavailable they are spawned.
"""
from __future__ import annotations

import ctypes
import multiprocessing
import multiprocessing.forkserver
import os
import signal
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.connection import wait as wait_for
from pathlib import Path
from typing import Any

from tokbench.cells import attempt_cell, time_limit
from tokbench.errors import StorageError
from tokbench.grid import Pairing
from tokbench.outcome import Failure, Outcome, Record, attempt, error_line, record_of
from tokbench.results import RecordError, load_record, provenance, utc_now, validate, write_record

PARENT_POLL_SECONDS = 0.5
STOP_GRACE_SECONDS = 5.0
STOPPED = (-signal.SIGTERM, -signal.SIGINT)  # exit codes of a worker stopped as a run is stopped
PR_SET_PDEATHSIG = 1  # prctl(2): the signal a process gets when its parent exits


def set_threads(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)


def trainer_provenance(commit: str | None, threads: int) -> dict[str, Any]:
    """Provenance of a process that trains with ``threads`` intra-op threads."""
    return {**provenance(commit), "threads": threads}


def execute(pairing: Pairing, prov: Mapping[str, Any]) -> Record:
    """The record of one attempt at ``pairing`` in this process; a record that fails validation
    (a metric out of its range, say) becomes a failed record saying why."""
    return _validated(pairing, attempt(pairing), prov)


def execute_cell(pairings: Sequence[Pairing], prov: Mapping[str, Any]) -> Iterator[Record]:
    """The record of each of ``pairings`` (a cell, :func:`tokbench.cells.attempt_cell`), in order, each as soon
    as it is known, validated as :func:`execute` validates one."""
    for pairing, outcome in zip(pairings, attempt_cell(pairings)):
        yield _validated(pairing, outcome, prov)


def _validated(pairing: Pairing, outcome: Outcome, prov: Mapping[str, Any]) -> Record:
    record = record_of(pairing, outcome, prov)
    try:
        validate(record)
    except ValueError as exc:
        invalid = Outcome(outcome.started_at, outcome.seconds, eval_split=outcome.eval_split,
                          error=f"invalid record: {exc}", failure=Failure("evaluate"))
        record = record_of(pairing, invalid, prov)
    return record


def _exit_with_parent(parent: int, server: int) -> None:
    """A worker whose parent was killed stops at once instead of training on as an orphan."""
    while True:
        time.sleep(PARENT_POLL_SECONDS)
        try:
            os.kill(parent, 0)
        except ProcessLookupError:
            os._exit(1)
        if os.getppid() != server:  # the fork server left with the parent
            os._exit(1)


def _die_with_server() -> None:
    """Let the fork server leave as soon as the parent does, and this worker with it, without waiting for a poll.

    The server exits when every holder of its "alive" pipe has gone; each worker inherits one end, so a killed
    parent left the server, and so the workers, up to the next poll of :func:`_exit_with_parent` (3.7 s measured
    on 2 loaded cores, the poll starved of the interpreter lock). Closing that end here, and asking the kernel to
    kill this worker when its parent (the server) exits, ends both within milliseconds of the parent (Linux).
    """
    from multiprocessing import forkserver

    server = getattr(forkserver, "_forkserver", None)
    if getattr(server, "_forkserver_alive_fd", None) is not None:
        os.close(server._forkserver_alive_fd)
        server._forkserver_alive_fd = None
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: the poll alone
        pass


def _stop_now(signum: int, frame: object) -> None:
    """End this worker at once, killed by ``signum`` as its default action would: the pairing it holds was
    interrupted, so it leaves no record (a stopped run is resumed by a plain rerun), and the parent, which
    sees the signal, stops the run.

    A handler of our own, not the default, because Lightning's ``fit`` replaces a default SIGTERM action with
    one that only notes the signal and raises ``SIGTERMException`` at the next step, which the worker would
    record as a failure that a rerun skips; a handler it finds, it keeps and calls after its own.
    """
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _report(conn: Connection, *message: Any) -> bool:
    """Send ``message`` to the parent; False when the parent has gone (killed, or stopping the run)."""
    try:
        conn.send(message)
    except OSError:
        return False
    return True


def _serve(conn: Connection, out_dir: Path, commit: str | None, threads: int, parent: int) -> None:
    """A worker's loop: receive a cell (one pairing or several that differ only in the seed), say it started,
    train it, and write and report each pairing's record as it is ready."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl+C is the parent's: it stops the grid and says so
    signal.signal(signal.SIGTERM, _stop_now)
    _die_with_server()
    set_threads(threads)
    threading.Thread(target=_exit_with_parent, args=(parent, os.getppid()), daemon=True).start()
    prov = trainer_provenance(commit, threads)
    while True:
        try:
            cell = conn.recv()
        except EOFError:
            return
        except Exception as exc:  # noqa: BLE001 - e.g. a plugin that this process cannot import
            if not _report(conn, "lost", f"the worker could not receive the pairing: {error_line(exc)}"):
                return
            continue
        if cell is None or not _report(conn, "started"):
            return
        for record in execute_cell(cell, prov):
            try:
                write_record(out_dir, record)
            except StorageError as exc:
                message: tuple[Any, ...] = ("unwritten", record["config_hash"], exc.reason)
            else:
                message = ("done", record)
            if not _report(conn, *message):
                return


def _context() -> multiprocessing.context.BaseContext:
    if "forkserver" in multiprocessing.get_all_start_methods():
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["tokbench.preload"])
        return context
    return multiprocessing.get_context("spawn")  # forking after torch is imported is unsafe


def start_server() -> None:
    """Start the fork server now (so that its import of torch overlaps the parent's planning), or check it runs.

    The server is started by ``python -c``, which puts the folder it starts in first on
    ``sys.path``: started where the user stands, a ``tokbench/`` folder there (the clone's
    parent folder, say) would shadow the package in the server and in every worker forked
    from it. So it starts in the folder that holds the installed package, where ``tokbench``
    is the package itself. Workers then take the parent's ``sys.path`` and working folder.
    """
    if _context().get_start_method() != "forkserver":
        return
    here = os.getcwd()
    os.chdir(Path(__file__).resolve().parent.parent)
    try:
        multiprocessing.forkserver.ensure_running()
    finally:
        os.chdir(here)


def signature(path: Path) -> tuple[int, int, int] | None:
    """What tells one version of a file from another (an atomic write makes a new inode), or None."""
    try:
        info = path.stat()
    except FileNotFoundError:
        return None
    return info.st_ino, info.st_mtime_ns, info.st_size


@dataclass
class _Job:
    """A cell in a worker: ``pending`` are its pairings without a reported record, by config hash;
    ``record_before`` the signature of each pairing's record file when the cell was handed out."""

    pairings: Sequence[Pairing]
    started_at: str
    clock: float
    record_before: dict[str, tuple[int, int, int] | None]
    deadline: float | None = None
    pending: dict[str, Pairing] = field(init=False)

    def __post_init__(self) -> None:
        self.pending = {p.config_hash: p for p in self.pairings}


@contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Hold Ctrl+C and SIGTERM until the block ends, then deliver them to the handlers in place before it.

    Starting a worker writes its start-up data to a pipe; an interrupt raised halfway through that write
    leaves the fork server's new child reading a cut pipe, and it prints a traceback to the user's terminal.
    Off the main thread, where handlers cannot be set, the block runs as it is.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    kinds = (signal.SIGINT, signal.SIGTERM)
    previous = {kind: signal.signal(kind, lambda signum, frame: held.append(signum)) for kind in kinds}
    try:
        yield
    finally:
        for kind, handler in previous.items():
            signal.signal(kind, handler)
        for signum in dict.fromkeys(held):
            signal.raise_signal(signum)


class _Worker:
    def __init__(self, context: multiprocessing.context.BaseContext, out_dir: Path, commit: str | None,
                 threads: int) -> None:
        self.conn, child = context.Pipe()
        self.process = context.Process(target=_serve, args=(child, out_dir, commit, threads, os.getpid()),
                                       name="tokbench-worker", daemon=True)
        with interrupts_deferred():
            self.process.start()
        child.close()
        self.job: _Job | None = None

    def stop(self, now: bool) -> None:
        if not now and self.process.is_alive():
            try:
                self.conn.send(None)
            except OSError:
                pass
            self.process.join(STOP_GRACE_SECONDS)
        if self.process.is_alive():
            self.process.kill()
        self.process.join()
        self.conn.close()


def _death(exitcode: int | None) -> tuple[Failure, str]:
    if exitcode is not None and exitcode < 0:
        name = signal.Signals(-exitcode).name
        return (Failure("worker", signal=name),
                f"the worker process was killed by {name} (crashed, killed or out of memory) during this pairing")
    return (Failure("worker", exit_status=exitcode),
            f"the worker process exited with status {exitcode} during this pairing, before reporting a result")


class LocalExecutor:
    """``jobs`` worker processes on this machine, each with ``threads`` torch threads; a pairing running longer
    than ``timeout`` seconds (counted from its start in the worker; a cell of N pairings, N times that) is
    stopped and recorded as timed out."""

    def __init__(self, out_dir: Path, commit: str | None, jobs: int, threads: int,
                 timeout: float | None = None) -> None:
        self.out_dir, self.commit, self.jobs, self.threads, self.timeout = out_dir, commit, jobs, threads, timeout
        self.context = _context()
        self.workers: list[_Worker] = []
        self._prov: dict[str, Any] | None = None

    def capacity(self) -> int:
        return self.jobs

    def provenance(self) -> Mapping[str, Any]:
        """Provenance for the records this process writes itself (a worker died, or not applicable)."""
        if self._prov is None:
            self._prov = trainer_provenance(self.commit, self.threads)
        return self._prov

    def submit(self, *pairings: Pairing) -> None:
        """Hand one pairing, or a cell of pairings that differ only in the seed, to an idle worker."""
        worker = self._idle_worker()
        worker.job = _Job(pairings, utc_now(), time.perf_counter(),
                          {p.config_hash: signature(self.out_dir / p.filename) for p in pairings})
        try:
            worker.conn.send(pairings)
        except OSError:
            pass  # it died just now: wait() finds it dead and records the failure

    def _idle_worker(self) -> _Worker:
        for worker in [w for w in self.workers if w.job is None]:
            if worker.process.is_alive():
                return worker
            self._retire(worker)  # killed between two pairings
        start_server()  # (re)started from the package's folder, never the user's (a no-op while it runs)
        worker = _Worker(self.context, self.out_dir, self.commit, self.threads)
        self.workers.append(worker)
        return worker

    def _retire(self, worker: _Worker) -> None:
        worker.stop(now=True)
        self.workers.remove(worker)

    def wait(self) -> list[tuple[Pairing, Record]]:
        while True:
            busy = [w for w in self.workers if w.job is not None]
            deadlines = [w.job.deadline for w in busy if w.job.deadline is not None]
            timeout = max(0.0, min(deadlines) - time.monotonic()) if deadlines else None
            wait_for([w.conn for w in busy] + [w.process.sentinel for w in busy], timeout)
            finished = [done for worker in busy for done in self._collect(worker)]
            if finished:
                return finished

    def _collect(self, worker: _Worker) -> list[tuple[Pairing, Record]]:
        """The pairings of ``worker``'s cell whose records came since the last look, each with its record; all
        that were left when the worker died or timed out."""
        job = worker.job
        assert job is not None
        done: list[tuple[Pairing, Record]] = []
        # Messages first: a worker that reported and then died lost nothing.
        while worker.conn.poll():
            try:
                kind, *payload = worker.conn.recv()
            except (EOFError, OSError):
                break
            if kind == "started" and self.timeout is not None:
                job.deadline = time.monotonic() + time_limit(self.timeout, len(job.pairings))[0]
            elif kind == "done":
                done.append((job.pending.pop(payload[0]["config_hash"]), payload[0]))
                if not job.pending:
                    worker.job = None
                    return done
            elif kind == "lost":
                return done + self._replace(worker, Failure("worker"), payload[0])
            elif kind == "unwritten":
                raise StorageError(self.out_dir / job.pending[payload[0]].filename,
                                   f"cannot write the record of a finished pairing: {payload[1]}")
        if not worker.process.is_alive():
            worker.process.join()
            if worker.process.exitcode in STOPPED:
                raise KeyboardInterrupt  # the worker was stopped as a run is stopped: so is the run, failing nothing
            return done + self._replace(worker, *_death(worker.process.exitcode))
        if job.deadline is not None and time.monotonic() >= job.deadline:
            return done + self._replace(worker, Failure("timeout"), time_limit(self.timeout, len(job.pairings))[1])
        return done

    def _replace(self, worker: _Worker, failure: Failure, error: str) -> list[tuple[Pairing, Record]]:
        """Retire ``worker`` and give each pairing it had not reported a failed record, unless the worker wrote
        that pairing's record before it died."""
        job = worker.job
        assert job is not None
        self._retire(worker)
        replaced = []
        for pairing in job.pending.values():
            path = self.out_dir / pairing.filename
            self._discard_partial(pairing)
            if signature(path) != job.record_before[pairing.config_hash]:
                try:
                    replaced.append((pairing, load_record(path)))
                    continue
                except RecordError:
                    pass
            outcome = Outcome(job.started_at, time.perf_counter() - job.clock, error=error, failure=failure)
            record = record_of(pairing, outcome, self.provenance())
            write_record(self.out_dir, record)
            replaced.append((pairing, record))
        return replaced

    def _discard_partial(self, pairing: Pairing) -> None:
        """Remove what a write of ``pairing``'s record cut short by a kill left (the record is whole or absent)."""
        for partial in self.out_dir.glob(f".{pairing.filename}.*.tmp"):
            partial.unlink(missing_ok=True)

    def close(self, abort: bool) -> None:
        for worker in self.workers:
            worker.stop(now=abort)
            for pairing in worker.job.pending.values() if worker.job is not None else ():
                self._discard_partial(pairing)
        self.workers.clear()
        # A worker started when an interrupt (Ctrl-C, SIGTERM) landed between its start and its registration in
        # self.workers is known to no list; multiprocessing's exit handler would join it, and a pairing that hangs
        # would then hold the interrupted run open for ever.
        for orphan in multiprocessing.active_children():
            if orphan.name == "tokbench-worker":
                orphan.kill()
                orphan.join()
