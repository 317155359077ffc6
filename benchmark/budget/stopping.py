"""The stopping check: does the protocol's early stop lose accuracy against training the same run to its cap?

    python benchmark/budget/stopping.py benchmark/budget/stopping-records [--suite FILE] [--tolerance 0.01] [--markdown]

Reads the records of ``benchmark/budget/stopping.toml``, where every sampled pairing is trained twice: once under
the protocol (stopped at its validation target) and once to the cap with no early stop (``train.target = 0``). The
two runs of a pair share everything else (task, model, seed, learning rate, cap and schedule), so until the
protocol's stop they take the same steps on the same batches; what the check measures is what the steps after the
stop would have added. It prints, per pair, both test accuracies and the gain, then how many pairs end within
``tolerance`` (the issue's bar: at least 95% within 0.01), split by why the protocol run stopped.

The protocol's runs are the pairings of the suite file (``--suite``, by default ``stopping.toml`` beside this script);
every other record is a run to the cap, and a record with a stop that the suite no longer plans is reported, not
paired. A family the suite trains to the cap (majority: ``target = 0``) has protocol runs that are their own cap runs.

A protocol run that stopped at the cap was itself trained to the cap with no early stop, and its rerun with
``train.target = 0`` takes the same steps: where such a run has no rerun, it is its own cap run (the table says
"same run"). The committed reruns show why that holds: every one run on the CPU of its protocol run ended
identical to it. ``--pending`` lists, per model, the tasks whose protocol runs stopped at the target and have no
cap run yet: only those need the second command.
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tabulate import tabulate

from tokbench.results import canonical_json, load_records

STOP_KEYS = ("target", "patience", "min_delta")  # the recipe keys that differ within a pair


@dataclass(frozen=True)
class Pair:
    """One sampled run under the protocol and the same run trained to its cap."""

    task: str
    model: str
    seed: int
    rung: str
    protocol: float
    cap: float
    stopped_because: str
    protocol_steps: int
    cap_steps: int
    rerun: bool = True  # False: a protocol run that stopped at the cap, paired with itself

    @property
    def gain(self) -> float:
        return self.cap - self.protocol


def device_kind(record: Mapping[str, Any]) -> str | None:
    """Where a record trained, ``cpu`` or ``cuda`` (its provenance says ``cuda (NVIDIA H100 ...)``)."""
    device = (record.get("provenance") or {}).get("device")
    return None if device is None else str(device).split()[0].split(":")[0]


def _pair_key(record: Mapping[str, Any]) -> str:
    """What makes two records the same run but for the stop: the identity (versions too) without the stop's keys,
    on the same kind of device (a GPU's kernels and a CPU's round differently: a pair across them measures both)."""
    params = record["params"]
    train = {key: value for key, value in params["train"].items() if key not in STOP_KEYS}
    return canonical_json([record["task"], record.get("task_version"), record["model"], record.get("model_version"),
                           record["seed"], params["task"], params["model"], train, device_kind(record)])


def _sides(records: Iterable[Mapping[str, Any]], plan: set[str] | None = None
           ) -> tuple[dict[str, Mapping[str, Any]], dict[str, Mapping[str, Any]], list[str]]:
    """The trained records by pair key: the protocol's and the cap's, and a line for each record of neither.

    With ``plan`` (the config hashes of the suite's pairings) the protocol's runs are the records in it, the cap's
    those outside it with no stop, and a record outside it with a stop is of neither (a stop the suite no longer
    uses). Without, a record with a target or a patience is the protocol's and one with neither the cap's."""
    protocol: dict[str, Mapping[str, Any]] = {}
    cap: dict[str, Mapping[str, Any]] = {}
    stale: list[str] = []
    for record in records:
        if record.get("status") != "ok" or not record.get("train", {}).get("steps"):
            continue
        train = record["params"]["train"]
        stops = bool(train.get("target") or train.get("patience"))
        if plan is not None and record["config_hash"] not in plan and stops:
            stale.append(f"{record['task']} x {record['model']} seed {record['seed']}: a stop the suite does not plan "
                         f"(target {train.get('target') or 0}, patience {train.get('patience') or 0})")
            continue
        is_protocol = record["config_hash"] in plan if plan is not None else stops
        side = protocol if is_protocol else cap
        key = _pair_key(record)
        if key in side:  # e.g. a patience run "rerun" with target=0 only: still a protocol run, never its own cap
            raise ValueError(f"{record['task']} x {record['model']} seed {record['seed']}: two "
                             f"{'cap' if side is cap else 'protocol'} runs differ only in their stop "
                             "(a run to the cap needs train.target=0 and train.patience=0)")
        side[key] = record
    return protocol, cap, stale


def planned_pairings(suite: Path) -> list[Any]:
    """``suite``'s pairings, as `tokbench run --suite` plans them."""
    from tokbench.grid import expand
    from tokbench.plugins import registry
    from tokbench.suites import load_suite

    return expand(load_suite(str(suite)), registry())


def plan_hashes(suite: Path) -> set[str]:
    """The config hashes of ``suite``'s pairings: the protocol's runs."""
    return {pairing.config_hash for pairing in planned_pairings(suite)}


def pairs(records: Iterable[Mapping[str, Any]], plan: set[str] | None = None) -> tuple[list[Pair], list[str]]:
    """Match each protocol record with its cap record (:func:`_sides` says which is which).

    Returns the pairs, sorted by task, model, rung and seed, and one line per record left without its partner (or,
    with ``plan``, outside it with a stop: :func:`_sides`).
    """
    protocol, cap, unmatched = _sides(records, plan)
    matched = []
    for key in sorted(protocol.keys() | cap.keys()):
        p = protocol.get(key)
        c = cap.get(key) or (p if p is not None and p["train"]["stopped_because"] == "cap" else None)
        if p is None or c is None:
            record = p or c
            which = "cap" if p is not None else "protocol"
            unmatched.append(f"{record['task']} x {record['model']} seed {record['seed']}: no {which} run")
            continue
        rung = ",".join(f"{k}={v}" for k, v in p.get("ladder", {}).get("axes", {}).items())
        matched.append(Pair(p["task"], p["model"], p["seed"], rung, p["metrics"]["accuracy"], c["metrics"]["accuracy"],
                            p["train"]["stopped_because"], p["train"]["steps"], c["train"]["steps"], c is not p))
    matched.sort(key=lambda pair: (pair.task, pair.model, pair.rung, pair.seed))
    return matched, unmatched


def pending(records: Iterable[Mapping[str, Any]], plan: set[str] | None = None,
            device: str | None = None) -> dict[str, list[str]]:
    """Per model, the tasks of protocol runs that stopped before the cap and have no cap run yet: what the second
    command still has to run (``--model M --task ...``); with ``device`` (``cpu``, ``cuda``), only protocol runs
    trained there, since a cap run pairs only with a run on its own kind of device."""
    protocol, cap, _ = _sides(records, plan)
    tasks: dict[str, set[str]] = {}
    for key, record in protocol.items():
        if device is not None and device_kind(record) != device:
            continue
        if key not in cap and record["train"]["stopped_because"] != "cap":
            tasks.setdefault(record["model"], set()).add(record["task"])
    return {model: sorted(found) for model, found in sorted(tasks.items())}


def summary(matched: list[Pair], tolerance: float) -> list[list[Any]]:
    """Rows ``[stopped because, pairs, within tolerance, share, largest gain, stop costs at most tolerance]``, then
    the total; a protocol run that stopped at the cap and is its own cap run is counted apart, as ``cap (same run)``.
    The last column reads the bar one-sided: the pairs whose cap run gains at most ``tolerance`` (a cap run that
    ends lower is no loss to the stop)."""
    def group(pair: Pair) -> str:
        return pair.stopped_because + ("" if pair.rerun else " (same run)")

    rows = []
    groups = sorted({group(pair) for pair in matched})
    for name, members in [*((g, [p for p in matched if group(p) == g]) for g in groups), ("all", matched)]:
        if not members:
            continue
        # rounded: accuracies are counts over a test set, and 0.793 - 0.783 is 0.010000000000000009 in floats
        within = sum(round(abs(pair.gain), 9) <= tolerance for pair in members)
        costs_little = sum(round(pair.gain, 9) <= tolerance for pair in members)
        rows.append([name, len(members), within, within / len(members), max(pair.gain for pair in members),
                     costs_little])
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="records of benchmark/budget/stopping.toml")
    parser.add_argument("--suite", type=Path, default=Path(__file__).with_name("stopping.toml"),
                        help="the suite whose pairings are the protocol's runs (default: stopping.toml beside this)")
    parser.add_argument("--tolerance", type=float, default=0.01, help="largest |cap - protocol| counted as equal")
    parser.add_argument("--markdown", action="store_true", help="GitHub tables instead of plain text")
    parser.add_argument("--pending", action="store_true",
                        help="only list, per model, the tasks whose protocol runs still need a run to the cap")
    parser.add_argument("--device", choices=("cpu", "cuda"),
                        help="with --pending: only protocol runs trained on this kind of device")
    args = parser.parse_args(argv)
    records = list(load_records(args.folder).records.values())
    plan = plan_hashes(args.suite)
    if args.pending:
        for model, tasks in pending(records, plan, args.device).items():
            print(f"--model {model} --task {' '.join(tasks)}")
        return 0
    matched, unmatched = pairs(records, plan)
    fmt = "github" if args.markdown else "simple"
    print(tabulate([[p.task, p.rung, p.model, p.seed, p.stopped_because, p.protocol_steps, p.protocol,
                     "rerun" if p.rerun else "same run", p.cap_steps, p.cap, p.gain] for p in matched],
                   headers=["task", "rung", "model", "seed", "stop", "steps", "protocol", "cap run", "cap steps", "cap",
                            "gain"], tablefmt=fmt, floatfmt=".3f"))
    print()
    print(tabulate(summary(matched, args.tolerance),
                   headers=["protocol stop", "pairs", f"within {args.tolerance:g}", "share", "largest gain",
                            f"gain at most {args.tolerance:g}"],
                   tablefmt=fmt, floatfmt=".3f"))
    for line in unmatched:
        print(f"unmatched: {line}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
