"""Synthetic run records (schema v1, valid for tokbench.results) for the leaderboard tests."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from tokbench.leaderboard.aggregate import Section
from tokbench.results import config_hash, identity, validate, write_record

WALK = {"K": 6, "context_length": 8, "p": 0.5, "train_size": 100, "val_size": 100, "test_size": 100}
LAYER = {"dtype": "float64", "positions": "onehot"}
GD = {"optimizer": "gd", "lr": 1.0, "steps": 50, "batch_size": 0, "lr_grid": []}


def publish(*argv: str) -> int:
    """``tokbench leaderboard ARGV --format all``: every file of a published page."""
    from tokbench.cli import main

    return main(["leaderboard", *argv, "--format", "all"])


def record(task: str = "random-walk", model: str = "attn-paper-a", seed: int = 0, accuracy: float = 0.5,
           bayes: float = 0.5, untrained: float = 0.17, task_params: dict | None = None,
           model_params: dict | None = None, train: dict | None = None, eval_split: str = "test",
           diagnostics: dict | None = None, profile: list[float] | None = None, error: str | None = None,
           meta: dict | None = None, task_version: str = "1", model_version: str = "1",
           ladder: dict | None = None) -> dict[str, Any]:
    """One record; ``error`` makes it a failed one; ``ladder`` marks it as a rung of a suite's ladder."""
    params = {"task": dict(WALK if task_params is None else task_params),
              "model": dict(LAYER if model_params is None else model_params), "train": dict(train or GD)}
    ident = identity(task, task_version, model, model_version, params, seed)
    ok = error is None
    metrics: dict[str, float] = {}
    if ok:
        metrics = {"accuracy": accuracy, "train_accuracy": min(1.0, accuracy + 0.01), "val_accuracy": accuracy,
                   f"{eval_split}_accuracy": accuracy, "bayes_accuracy": bayes,
                   "normalized_accuracy": accuracy / bayes, **(diagnostics or {})}
    rec = {
        "schema_version": 1, **ident, "config_hash": config_hash(ident), "status": "ok" if ok else "failed",
        "error": error, "eval_split": eval_split, "metrics": metrics,
        "train": {"steps": params["train"]["steps"], "final_loss": 0.7, "wall_seconds": 1.5 + seed,
                  **params["train"]} if ok else {},
        "curve": ({"step": [0, 25, 49], "loss": [2.0, 1.0, 0.7], "accuracy": [untrained, accuracy, accuracy]}
                  if ok else {}),
        "attention_profile": (profile or [0.1, 0.1, 0.2, 0.6]) if ok else None,
        "meta": {"task_description": f"{task} description", "task_citation": "[A]",
                 "model_description": f"{model} description", "model_citation": "[A]",
                 "recipe": "gd, lr 1, 50 steps, full batch", **(meta or {})},
        "provenance": {"tokbench_version": "0.1.0", "git_commit": None, "python": "3.11.7", "torch": "2.13.0",
                       "lightning": "2.6.0", "device": "cpu", "started_at": f"2026-01-01T00:00:{seed:02d}Z"},
    }
    if ladder is not None:
        rec["ladder"] = ladder
    validate(rec)
    return rec


def write(folder: Path, records: list[dict[str, Any]]) -> Path:
    for rec in records:
        write_record(folder, rec)
    return folder


def seeds(n: int, accuracies: list[float], **kwargs: Any) -> list[dict[str, Any]]:
    """``n`` records of one pairing with the given per-seed accuracies."""
    return [record(seed=s, accuracy=a, **kwargs) for s, a in zip(range(n), accuracies)]


def sections(records: list[dict[str, Any]], name: str = "") -> list[Section]:
    """The records as the only section of a leaderboard, as `tokbench leaderboard --records DIR` loads them."""
    return [Section.of(records, name)]


def ladder(task: str, model: str, means: list[float], n: int | list[int] = 3, spread: float = 0.01,
           axes: dict[str, list[Any]] | None = None, pitfall: str = "", family: str | None = None,
           bayes: float = 1.0, examples: int = 1000, **kwargs: Any) -> list[dict[str, Any]]:
    """The records of one model on a task's ladder: per rung ``n`` seeds around ``means[rung]`` (accuracy)."""
    axes = axes or {"K": [4, 8, 16][:len(means)], "context_length": [8, 16, 32][:len(means)]}
    counts = n if isinstance(n, list) else [n] * len(means)
    meta = {**({"model_family": family} if family else {}), **({"task_pitfall": pitfall} if pitfall else {})}
    recs = []
    for rung, (centre, count) in enumerate(zip(means, counts)):
        values = {name: vals[rung] for name, vals in axes.items()}
        offsets = [spread * ((s % 3) - 1) for s in range(count)]  # -spread, 0, +spread, ...
        recs += [record(task=task, model=model, seed=s, accuracy=min(1.0, max(0.0, centre + d)), bayes=bayes,
                        task_params={**WALK, "test_size": examples, **values}, meta=meta,
                        ladder={"rung": rung, "rungs": len(means), "axes": values}, **kwargs)
                 for s, d in zip(range(count), offsets)]
    return recs


def v3(recs: list[dict[str, Any]], chance: float, oracle: float | None = None,
       budget: dict[int, float] | None = None, stopped: str = "cap",
       evaluations: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """The protocol-v3 fields on ``recs`` (in place): paired chance and oracle accuracies (the oracle defaults to
    the Bayes optimum), a budget curve (``{step: accuracy}``, the final step appended from the record's accuracy
    and its steps), why training stopped, and extra evaluations."""
    for rec in recs:
        if rec["status"] != "ok":
            continue
        metrics = rec["metrics"]
        metrics["chance_accuracy"] = chance
        metrics["oracle_accuracy"] = metrics["bayes_accuracy"] if oracle is None else oracle
        rec["train"]["stopped_because"] = stopped
        rec["train"]["max_steps"] = rec["params"]["train"]["steps"]
        if budget is not None:
            rec["budget_curve"] = [{"step": s, "accuracy": a} for s, a in budget.items()] + [
                {"step": rec["train"]["steps"], "accuracy": metrics["accuracy"], "final": True}]
        if evaluations is not None:  # planned in the identity, as a suite's [grid.evaluate] plans them
            rec["evaluations"] = evaluations
            rec["params"]["evaluate"] = [entry["overrides"] for entry in evaluations]
            rec["config_hash"] = config_hash(identity(rec["task"], rec["task_version"], rec["model"],
                                                      rec["model_version"], rec["params"], rec["seed"]))
        validate(rec)
    return recs
