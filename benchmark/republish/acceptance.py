"""What the fair-comparison issue asks of the republished `tokbench` section, checked on records folders.

    python benchmark/republish/acceptance.py RECORDS [--scale SCALE_RECORDS] [--markdown]

RECORDS is the `tokbench` section's folder (``benchmark/republish/records`` while the republish runs,
``leaderboard/records/tokbench`` once published); SCALE_RECORDS the GPU-scale section's, where the larger sizes may
live instead. It prints one row per requirement with what the records show, and exits 1 if any does not hold, so the
republish can be judged on its records before they replace the published ones. The stopping check, the other item of
that list, has its own tool and test (``benchmark/budget/stopping.py``, ``tests/test_budget_stopping.py``).

A trained record is an ok record whose pairing has a recipe (``params.train`` is not empty: baselines and the oracle
have none). A model family's learning rates are every ``lr`` and ``lr_grid`` value its trained records of one task
family report: the rates its sweeps tried.
"""
from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import fmean
from typing import Any

from tabulate import tabulate

from tokbench.results import canonical_json, load_records

Record = Mapping[str, Any]

#: the models the issue names (item 4) as this suite implements them: Mamba, the 4-layer transformer, a gated
#: convolution (H3) and a gated linear attention (GLA)
REQUIRED_MODELS = ("mamba", "transformer-4l", "gla", "h3")
MIN_RATES = 3
ATTENTION_ON_MQAR = ("transformer-2l", 0.97)  # Zoology: attention solves MQAR at every size it tried
LONG_CONTEXT = 256
WIDE_SELECTION = 64


@dataclass(frozen=True)
class Check:
    """One requirement: whether the records meet it, and what they show."""

    requirement: str
    holds: bool
    found: str


def trained(records: Iterable[Record]) -> list[Record]:
    return [r for r in records if r.get("status") == "ok" and r["params"].get("train")]


def _task_param(record: Record, name: str) -> Any:
    return record["params"]["task"].get(name)


def check_parameters(section: Sequence[Record]) -> Check:
    missing = [r for r in section if not (r.get("size") or {}).get("parameters")]
    return Check("every trained record carries a parameter count", bool(section) and not missing,
                 f"{len(section) - len(missing)} of {len(section)} trained records")


def check_rates(section: Sequence[Record]) -> Check:
    rates: dict[tuple[str, str], set[float]] = defaultdict(set)
    for r in section:
        rates[r["model"], r["task"]].update([r["params"]["train"]["lr"], *r["params"]["train"].get("lr_grid", [])])
    short = sorted(f"{model} on {task} ({len(tried)})" for (model, task), tried in rates.items()
                   if len(tried) < MIN_RATES)
    found = f"{len(rates) - len(short)} of {len(rates)} (model, task family) pairs"
    return Check(f"every (model, task family) pair tried at least {MIN_RATES} learning rates",
                 bool(rates) and not short, found + (f"; fewer: {', '.join(short[:6])}" if short else ""))


def check_models(section: Sequence[Record]) -> Check:
    present = {r["model"] for r in section}
    missing = [m for m in REQUIRED_MODELS if m not in present]
    return Check(f"{', '.join(REQUIRED_MODELS)} have trained records", not missing,
                 "all present" if not missing else f"missing: {', '.join(missing)}")


def _largest(records: Iterable[Record], task: str, param: str) -> int:
    return max((_task_param(r, param) or 0 for r in records if r["task"] == task), default=0)


def check_size(records: Sequence[Record], task: str, param: str, least: int) -> Check:
    largest = _largest(records, task, param)
    return Check(f"{task} records with {param} >= {least}", largest >= least, f"largest {param}: {largest or 'none'}")


def check_attention_on_mqar(section: Sequence[Record]) -> Check:
    model, least = ATTENTION_ON_MQAR
    rungs: dict[str, list[float]] = defaultdict(list)
    for r in section:
        if r["task"] == "mqar" and r["model"] == model:
            rungs[canonical_json(r["params"]["task"])].append(r["metrics"]["accuracy"])
    means = sorted((fmean(accuracies), len(accuracies)) for accuracies in rungs.values())
    shown = ", ".join(f"{mean:.3f} ({n} seeds)" for mean, n in means) or "no records"
    return Check(f"{model}'s mean test accuracy >= {least} on every mqar rung",
                 bool(means) and all(mean >= least for mean, _ in means), shown)


def check_alibi_heads(section: Sequence[Record]) -> Check:
    heads = [r["params"]["model"].get("heads", 1) for r in section if r["model"] == "attn-alibi"]
    return Check("an attn-alibi record with more than one head", any(h > 1 for h in heads),
                 f"heads: {sorted(set(heads)) or 'no records'}")


def checks(section: Iterable[Record], scale: Iterable[Record] = ()) -> list[Check]:
    """Every requirement, on the section's records and the GPU-scale section's (``scale``): the larger sizes may
    be in either."""
    section, scale = trained(section), trained(scale)
    both = [*section, *scale]
    return [check_parameters(section), check_rates(section), check_models(section),
            check_size(both, "mqar", "context_length", LONG_CONTEXT), check_attention_on_mqar(section),
            check_size(both, "selective-copy", "context_length", LONG_CONTEXT),
            check_size(both, "sparse-selection", "num_tokens", WIDE_SELECTION), check_alibi_heads(section)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("records", type=Path, help="the tokbench section's records folder")
    parser.add_argument("--scale", type=Path, help="the GPU-scale section's records folder")
    parser.add_argument("--markdown", action="store_true", help="a GitHub table instead of plain text")
    args = parser.parse_args(argv)
    section = load_records(args.records).records.values()
    scale = load_records(args.scale).records.values() if args.scale else ()
    results = checks(section, scale)
    print(tabulate([[c.requirement, "yes" if c.holds else "no", c.found] for c in results],
                   headers=["requirement", "holds", "the records show"], tablefmt="github" if args.markdown else "simple"))
    return 0 if all(c.holds for c in results) else 1


if __name__ == "__main__":
    sys.exit(main())
