"""``tokbench verify``: retrain a sample of run records from their stored configuration and compare every metric,
or (``--integrity``) check the records and their published manifest without training.

Retraining runs through the same isolated worker processes, ``--timeout`` and exit
status rules as ``tokbench run`` (:func:`tokbench.runner.run_grid`): a model that exits,
crashes or hangs fails its record and the others go on. The command exits 0 only after a
summary line that counts every record checked.

Exit codes: 0 when every checked record reproduces (or, with ``--integrity``, matches
its manifest), 1 when any differs, cannot be retrained or fails, 2 for usage errors (an
invalid, edited or duplicated record file included), 130 when interrupted.
"""
from __future__ import annotations

import argparse
import secrets
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from tokbench.commands import positive_int
from tokbench.errors import UsageError
from tokbench.verification import (ACCURACY_TOLERANCE, DEVICE_TOLERANCE, ENVIRONMENT_KEYS, Verdict,
                                   is_accuracy)

EXIT_INTERRUPTED = 130


def register(subparsers: argparse._SubParsersAction) -> None:
    from tokbench.commands.run import seconds

    parser = subparsers.add_parser(
        "verify", help="retrain a sample of run records and check that their metrics reproduce",
        description="Retrain run records from their stored configuration (parameters, recipe, seed, torch thread "
                    "count) in isolated worker processes, as `tokbench run` does, and compare every number the leaderboard "
                    "draws from (metrics, steps taken, why training stopped, budget curve, evaluations). In the "
                    f"recorded environment ({', '.join(ENVIRONMENT_KEYS)}) every metric must be bit-identical; in "
                    f"another one, the accuracies must agree within {ACCURACY_TOLERANCE:g} ({DEVICE_TOLERANCE:g} for "
                    "a record made on another kind of device, e.g. cuda against cpu), the other metrics are "
                    "reported only (diagnostics of runs driven by rounding noise differ across machines), and the "
                    "line names the environment keys that differ. Every record read is validated first: derived "
                    "metrics (normalized_accuracy) must equal their recomputation, and one pairing in two files "
                    "is an error naming both.",
        epilog="Exit codes: 0 every checked record reproduces (after a summary line counting them), 1 a mismatch, "
               "a rerun that failed or timed out, or a manifest mismatch, 2 usage error or an invalid record file, "
               "130 interrupted.")
    parser.add_argument("records", type=Path, metavar="RECORDS", help="folder of run records, searched recursively")
    parser.add_argument("--sample", type=positive_int, metavar="N",
                        help="verify N records drawn at random (default: every ok record)")
    parser.add_argument("--seed", type=int, metavar="S",
                        help="seed of the sample's draw, to verify the same records again (default: a new draw each "
                             "time; the seed drawn is printed and stamped)")
    parser.add_argument("--integrity", action="store_true",
                        help="train nothing: check every record and the published folder's manifest (SHA256SUMS, "
                             "written by `tokbench leaderboard --format all`): no file edited, added or removed "
                             "since publishing")
    parser.add_argument("--stamp", action="store_true",
                        help="when every sampled record was checked, write what was found (commit, environment, "
                             "the records checked, how many reproduced, which did not, a digest of the folder's "
                             "records) to RECORDS/VERIFICATION.json, which `tokbench leaderboard` states in the "
                             "section of those records, saying whether the records changed since")
    parser.add_argument("--jobs", "-j", type=positive_int, metavar="N",
                        help="worker processes (default: the usable cores divided by each record's threads)")
    parser.add_argument("--timeout", type=seconds, metavar="SECONDS",
                        help="stop a retraining that runs longer and count its record as failed (default: no limit)")
    parser.set_defaults(handler=_verify)


def _verify(args: argparse.Namespace) -> int:
    from tokbench import verification
    from tokbench.results import load_records

    if not args.records.is_dir():
        raise UsageError(f"RECORDS {args.records}: " + ("not a folder; RECORDS names a folder of run records"
                                                        if args.records.exists() else "no such folder"))
    loaded = load_records(verification.records_in(args.records))
    problems = [*loaded.problems, *loaded.newer.values(), *loaded.duplicates]
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise UsageError(f"{problems[0]}{more}; fix or remove the file")
    if args.integrity:
        return _integrity(args.records, len(loaded.records))
    if args.seed is None:  # a new sample each time, so that repeated checks cover more than one fixed subset
        args.seed = secrets.randbelow(2**32)
    chosen = verification.sample(list(loaded.records.values()), args.sample, args.seed)
    if not chosen:
        raise UsageError(f"no ok run records in {args.records}")
    return _retrain(args, chosen, len(loaded.records))


def _integrity(folder: Path, count: int) -> int:
    from tokbench import manifest

    root, listed, problems = manifest.check(folder)
    if root is None:
        print(f"tokbench: error: {count} records valid, but no {manifest.MANIFEST} at or above {folder}: "
              "publish with `tokbench leaderboard --format all` to make one", file=sys.stderr)
        return 1
    for problem in problems:
        print(f"FAIL  {problem}")
    print(f"{count} records valid; {listed} files listed in {root / manifest.MANIFEST} checked: "
          f"{len(problems)} problems", file=sys.stderr if problems else sys.stdout)
    return 1 if problems else 0


def _retrain(args: argparse.Namespace, chosen: list[dict[str, Any]], total: int) -> int:
    from tokbench import verification
    from tokbench.commands import loaded_registry
    from tokbench.results import provenance

    registry = loaded_registry()
    here = provenance(None)
    drawn = f", drawn with --seed {args.seed}" if len(chosen) < total else ""
    print(f"verifying {len(chosen)} of {total} records in {args.records}{drawn} "
          f"(here: {', '.join(f'{k} {here[k]}' for k in ENVIRONMENT_KEYS if k in here)})", flush=True)
    verdicts: list[Verdict] = []
    pending: dict[int, list[tuple[Any, dict[str, Any], str | None]]] = {}  # threads -> (pairing, record, note)
    unbuildable = 0  # records this installation cannot rebuild (a missing plugin): no verdict on the records
    for record in chosen:
        exact = verification.same_environment(record, here)
        try:
            pairing, note = verification.rebuild(record, registry)
        except UsageError as exc:
            verdicts.append(_report(Verdict(record, exact, error=str(exc)), here))
            unbuildable += 1
            continue
        pending.setdefault(verification.threads(record), []).append((pairing, record, note))
    def judge(record: dict[str, Any], rerun: dict[str, Any], note: str | None) -> None:
        verdict = verification.compare(record, rerun, verification.same_environment(record, here))
        verdict.note = note
        verdicts.append(_report(verdict, here))

    try:
        for threads, group in sorted(pending.items()):
            _rerun_all(args, group, threads, judge)
    except KeyboardInterrupt:
        _summary(verdicts, len(chosen))
        print("tokbench: interrupted; the records above were checked", file=sys.stderr)
        return EXIT_INTERRUPTED
    bad = _summary(verdicts, len(chosen))
    if args.stamp and unbuildable:
        print(f"tokbench: no stamp written: {unbuildable} of the sampled records cannot be rebuilt here (see FAIL "
              "above); a stamp says whether records reproduce, not what is installed", file=sys.stderr)
    elif args.stamp:
        _write_stamp(args, verdicts, total, here)
    return 1 if bad else 0


def _write_stamp(args: argparse.Namespace, verdicts: list[Verdict], total: int, here: Mapping[str, Any]) -> None:
    import json

    from tokbench import verification
    from tokbench.results import STAMP, git_commit
    from tokbench.storage import atomic_write

    folder = verification.records_in(args.records)
    found = verification.stamp(verdicts, total, args.sample, args.seed, {**here, "git_commit": git_commit()},
                               verification.records_digest(folder))
    path = atomic_write(folder / STAMP, json.dumps(found, indent=2) + "\n")
    print(f"wrote {path}: {found['reproduced']} of {found['checked']} reproduced", flush=True)


def _rerun_all(args: argparse.Namespace, group: list[tuple[Any, dict[str, Any], str | None]], threads: int,
               judge: Callable[[dict[str, Any], dict[str, Any], str | None], None]) -> None:
    """Retrain ``group`` (pairings of one thread count) in isolated workers, calling ``judge(record, rerun, note)``
    as each finishes. The reruns' records go to a temporary folder: the verified folder is never written."""
    from tokbench.locks import PairingLocks
    from tokbench.results import git_commit
    from tokbench.runner import make_executor, run_grid, usable_cores

    jobs = args.jobs or max(1, usable_cores() // threads)
    waiting = {pairing.config_hash: (record, note) for pairing, record, note in group}
    with tempfile.TemporaryDirectory(prefix="tokbench-verify-") as scratch:
        out = Path(scratch)
        executor = make_executor("local", out, git_commit(), jobs, len(group), threads, args.timeout)
        run_grid([pairing for pairing, _, _ in group], executor, _Judged(waiting, judge), PairingLocks(out, {}))


class _Judged:
    """The progress of :func:`tokbench.runner.run_grid`: each rerun is judged against its record as it finishes."""

    def __init__(self, waiting: Mapping[str, tuple[dict[str, Any], str | None]],
                 judge: Callable[[dict[str, Any], dict[str, Any], str | None], None]) -> None:
        self.waiting, self.judge = waiting, judge

    def started(self, pairing: Any) -> None:
        pass

    def finished(self, pairing: Any, rerun: Mapping[str, Any]) -> None:
        record, note = self.waiting[pairing.config_hash]
        self.judge(record, dict(rerun), note)

    taken = finished  # a record of this pairing that appeared meanwhile (never in a fresh scratch folder)


def _report(verdict: Verdict, here: Mapping[str, Any]) -> Verdict:
    from tokbench.verification import environment_differences

    print(_line(verdict, environment_differences(verdict.record, here)), flush=True)
    return verdict


def _summary(verdicts: list[Verdict], chosen: int) -> int:
    bad = sum(not v.ok for v in verdicts)
    unchecked = f"; {chosen - len(verdicts)} not checked" if len(verdicts) < chosen else ""
    print(f"{len(verdicts) - bad} of {len(verdicts)} records checked reproduce (bit-identical or within "
          f"tolerance); {bad} do not{unchecked}", file=sys.stderr if bad or unchecked else sys.stdout, flush=True)
    return bad + chosen - len(verdicts)


def _line(verdict: Verdict, differences: list[str]) -> str:
    rec = verdict.record
    name = f"{rec['task']} x {rec['model']} seed {rec['seed']} ({rec['config_hash']})"
    if verdict.error:
        return f"FAIL  {name}: {verdict.error}"
    mode = "same environment" if verdict.exact else f"another environment ({'; '.join(differences)})"
    if verdict.devices:
        mode = (f"made on {verdict.devices[0]}, checked on {verdict.devices[1]}: within {verdict.tolerance:g} "
                f"({'; '.join(differences)})")
    changed = "; ".join(f"{m} {a} -> {b}" + ("" if m in verdict.mismatches else
                                               " (within tolerance)" if is_accuracy(m) else " (not compared)")
                        for m, (a, b) in verdict.differences.items())
    status = "ok  " if verdict.ok else "FAIL"
    note = f" [{verdict.note}]" if verdict.note else ""
    return f"{status}  {name}, {mode}: " + (changed or "every metric bit-identical") + note
