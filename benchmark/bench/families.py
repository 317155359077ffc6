"""Benchmark section for the tokbench suite: what each task family costs, as a share of all of them.

    python benchmark/bench/run.py --only families [--quick]

The families are read from the suite (a family added to it gets its line). For each one, seed 0 of
its middle rung is trained and evaluated in this process (one torch thread, as a worker) for every
model of a fixed set, with the recipes the suite gives them (its budget, lr sweep and model tables);
a model that does not apply to the task costs nothing, as in a run. Rounds alternate the order of
the families and keep each pairing's median; every figure is a family's share of the sum.
"""
from __future__ import annotations

import importlib
import statistics
from collections.abc import Mapping

from timing import median_seconds
from tokbench.grid import Pairing, expand
from tokbench.outcome import attempt
from tokbench.plugins import registry
from tokbench.suites import load_suite

SUITE = "tokbench"
# One model of each cost class the suite trains: one attention layer (full batch, two lrs), a 2-layer
# transformer (mini-batches, warm-up) and a recurrent network. Mamba, ~10x a transformer step, is left out.
MODELS = ("attn-nope", "transformer", "gru")


def _middle_rungs() -> dict[str, list[Pairing]]:
    """Per family, in suite order, seed 0 of its middle rung for each model of ``MODELS`` that applies to it."""
    families: dict[str, list[Pairing]] = {}
    for pairing in expand(load_suite(SUITE), registry(), models=MODELS, seeds=1):
        rung = pairing.variant.rung
        middle = rung is None or rung.index == rung.count // 2
        if middle and pairing.not_applicable is None:
            families.setdefault(pairing.task_spec.name, []).append(pairing)
        else:
            families.setdefault(pairing.task_spec.name, [])
    return families


def _train(pairing: Pairing) -> None:
    outcome = attempt(pairing)
    if outcome.status != "ok":
        raise RuntimeError(f"{pairing.task_spec.name} x {pairing.model_spec.name}: {outcome.error}")


def _warm_up(families: Mapping[str, list[Pairing]]) -> None:
    """Import what the first timing would otherwise pay for: the harness and every task's and model's module."""
    importlib.import_module("tokbench.harness")
    for pairing in (p for pairings in families.values() for p in pairings):
        pairing.task_spec.create(pairing.task_params)
        importlib.import_module(pairing.model_spec.implementation.partition(":")[0])


def _note(pairings: list[Pairing], seconds: Mapping[str, float]) -> str:
    if not pairings:
        return f"no model of {', '.join(MODELS)} applies"
    rung = pairings[0].variant.rung
    where = "no ladder" if rung is None else f"rung {rung.index + 1} of {rung.count}: " + ", ".join(
        f"{key}={value}" for key, value in rung.axes.items())
    total = sum(seconds.values())
    split = ", ".join(f"{p.model_spec.name} {seconds[p.model_spec.name] / total:.0%}" for p in pairings)
    return f"{where}; {split}"


def run(quick: bool) -> list[tuple[str, float, str]]:
    families = _middle_rungs()
    _warm_up(families)
    times: dict[tuple[str, str], list[float]] = {}
    order = list(families)
    for round_ in range(1 if quick else 3):
        for family in order if round_ % 2 == 0 else reversed(order):
            for pairing in families[family]:
                key = (family, pairing.model_spec.name)
                times.setdefault(key, []).append(median_seconds(lambda: _train(pairing), 1))
    seconds = {family: {p.model_spec.name: statistics.median(times[family, p.model_spec.name]) for p in pairings}
               for family, pairings in families.items()}
    total = sum(sum(by_model.values()) for by_model in seconds.values())
    return [(f"{family}: share of one seed's cost",
             sum(seconds[family].values()) / total, _note(pairings, seconds[family]))
            for family, pairings in families.items()]
