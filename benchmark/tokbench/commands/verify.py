"""``tokbench verify``: retrain a sample of run records from their stored configuration and compare every metric.

Exit codes: 0 when every sampled record reproduces, 1 when any differs beyond
what its environment allows (or cannot be retrained), 2 for usage errors.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tokbench.commands import positive_int
from tokbench.errors import UsageError
from tokbench.verification import ACCURACY_TOLERANCE, ENVIRONMENT_KEYS, Verdict, is_accuracy


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "verify", help="retrain a sample of run records and check that their metrics reproduce",
        description="Retrain run records from their stored configuration (parameters, recipe, seed, torch thread "
                    "count) and compare every metric. In the recorded environment "
                    f"({', '.join(ENVIRONMENT_KEYS)}) every metric must be bit-identical; in another one, the "
                    f"accuracies must agree within {ACCURACY_TOLERANCE:g} and the other metrics are reported only "
                    "(diagnostics of runs driven by rounding noise differ across machines).",
        epilog="Exit codes: 0 all reproduce, 1 a mismatch or a rerun that failed, 2 usage error.")
    parser.add_argument("records", type=Path, metavar="RECORDS", help="folder of run records, searched recursively")
    parser.add_argument("--sample", type=positive_int, metavar="N",
                        help="verify N records drawn at random (default: every ok record)")
    parser.add_argument("--seed", type=int, default=0, metavar="S",
                        help="seed of the sample's draw (default 0), so the same records are verified every time")
    parser.set_defaults(handler=_verify)


def _verify(args: argparse.Namespace) -> int:
    from tokbench import verification
    from tokbench.commands import loaded_registry
    from tokbench.results import load_records, provenance

    if not args.records.is_dir():
        raise UsageError(f"RECORDS {args.records}: no such folder")
    loaded = load_records(args.records)
    if loaded.problems:
        raise UsageError(f"{loaded.problems[0]}; fix or remove the file")
    chosen = verification.sample(list(loaded.records.values()), args.sample, args.seed)
    if not chosen:
        raise UsageError(f"no ok run records in {args.records}")
    registry = loaded_registry()
    here = provenance(None)
    print(f"verifying {len(chosen)} of {len(loaded.records)} records in {args.records} "
          f"(here: {', '.join(f'{k} {here[k]}' for k in ENVIRONMENT_KEYS if k in here)})", flush=True)
    bad = 0
    for record in chosen:
        exact = verification.same_environment(record, here)
        try:
            again, note = verification.rerun(record, registry)
            verdict = verification.compare(record, again, exact)
            verdict.note = note
        except UsageError as exc:
            verdict = Verdict(record, exact, error=str(exc))
        bad += not verdict.ok
        print(_line(verdict), flush=True)
    rule = "bit-identical or within tolerance"
    print(f"{len(chosen) - bad} of {len(chosen)} records reproduce ({rule}); {bad} do not",
          file=sys.stderr if bad else sys.stdout)
    return 1 if bad else 0


def _line(verdict: Verdict) -> str:
    rec = verdict.record
    name = f"{rec['task']} x {rec['model']} seed {rec['seed']} ({rec['config_hash']})"
    mode = "same environment" if verdict.exact else "another environment"
    if verdict.error:
        return f"FAIL  {name}: {verdict.error}"
    changed = "; ".join(f"{m} {a} -> {b}" + ("" if m in verdict.mismatches else
                                               " (within tolerance)" if is_accuracy(m) else " (not compared)")
                        for m, (a, b) in verdict.differences.items())
    status = "ok  " if verdict.ok else "FAIL"
    note = f" [{verdict.note}]" if verdict.note else ""
    return f"{status}  {name}, {mode}: " + (changed or "every metric bit-identical") + note
