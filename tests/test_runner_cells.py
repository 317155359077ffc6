"""Cells in the runner (issue 31): pairings that differ only in the seed train together in one worker.

Each pairing of a cell gets the record it gets alone (on a CPU bit for bit), a pairing that raises or diverges
fails alone, and a worker killed or timed out mid-cell fails the pairings it had not finished. The misbehaving
model below misbehaves in the one replica whose initialisation drew ``draw``: the draw a seed's model makes
first, after the harness seeds torch with that seed's init seed, as :func:`draw_of` repeats it.
"""
from __future__ import annotations

import io
import json
import os
import time
from pathlib import Path

import pytest
import torch
from rich.console import Console

from run_support import TINY_SUITE, record_files, wait_until, write_suite
from tokbench.cells import group, time_limit
from tokbench.cli import main
from tokbench.grid import Pairing, Rung, Variant
from tokbench.isolation import LocalExecutor, execute, trainer_provenance
from tokbench.locks import PairingLocks
from tokbench.model import ModelOutput, TokenModel
from tokbench.outputs import RunOutputs
from tokbench.params import Param
from tokbench.plugins import registry
from tokbench.progress import PlainProgress
from tokbench.results import load_records
from tokbench.runner import make_executor, run_grid
from tokbench.seeding import derive_seed
from tokbench.specs import ModelSpec, Recipe

LIMIT_SECONDS = 300  # for a worker to reach a moment on a loaded machine; tiny pairings train in well under a second
TIMEOUT = 2.0  # seconds per pairing, for a cell that hangs whatever the limit
SEEDS = (0, 1, 2)
# The tiny runner suite with a sweep of two rates: a cell of 2 seeds is a stack of 4 replicas.
SWEPT_SUITE = TINY_SUITE + "[grid.sweep]\nlr_factors = [0.5, 2.0]\n"


class CellModel(TokenModel):
    """A bigram table; while training, the replica whose initialisation drew ``draw`` raises (``act = "raise"``),
    outputs NaN (``"nan"``) or marks the folder ``marks`` and hangs (``"hang"``)."""

    def __init__(self, params, task):
        super().__init__(params, task)
        self.draw = int(torch.randint(2**31, ()))
        self.table = torch.nn.Parameter(0.1 * torch.randn(self.vocab_size, self.vocab_size))

    def forward(self, tokens, need_attention=False):
        logits = self.table[tokens[:, -1]]
        if self.training and self.draw == self.params["draw"]:
            if self.params["act"] == "raise":
                raise RuntimeError("raised on purpose by one replica")
            if self.params["act"] == "nan":
                return ModelOutput(logits * float("nan"))
            (Path(self.params["marks"]) / str(os.getpid())).touch()
            time.sleep(3600)
        return ModelOutput(logits)


CELL_MODEL = ModelSpec(
    name="cell-model", version="1", description="Misbehaves in one replica.",
    implementation=f"{__name__}:CellModel", recipe=Recipe(optimizer="adam", lr=0.1, steps=3),
    params=(Param("act", "str", "raise", choices=("raise", "nan", "hang")), Param("draw", "int", -1),
            Param("marks", "str", "")))


def draw_of(seed: int) -> int:
    torch.manual_seed(derive_seed(seed, "init"))
    return int(torch.randint(2**31, ()))


def walk_pairings(model: ModelSpec, seeds=SEEDS, **params) -> list[Pairing]:
    task = registry().task("random-walk")
    task_params = task.resolve({"context_length": 8, "train_size": 32, "val_size": 16, "test_size": 32})
    variant = Variant(task, model, task_params, model.resolve(params), model.recipe)
    return [Pairing(variant, seed) for seed in seeds]


def test_pairings_that_differ_only_in_the_seed_form_one_cell():
    task, model = registry().task("random-walk"), registry().model("attn-nope")
    params, recipe = model.resolve({}), model.recipe

    def pairings(task_params, recipe=recipe, rung=None, outputs=RunOutputs()):
        variant = Variant(task, model, task.resolve(task_params), params, recipe, rung, outputs=outputs)
        return [Pairing(variant, seed) for seed in (0, 1)]

    same = pairings({})
    other_rate = pairings({}, recipe.override({"lr": recipe.lr * 2}))
    other_rung = pairings({"context_length": 16}, rung=Rung(1, 2, {"context_length": 16}))
    assert same[0].cell == same[1].cell and len({same[0].cell, other_rate[0].cell, other_rung[0].cell}) == 3
    interleaved = [same[0], other_rate[0], other_rung[0], same[1], other_rung[1], other_rate[1]]
    assert group(interleaved, True) == [same, other_rate, other_rung]
    assert group(interleaved, False) == [[p] for p in interleaved]
    logged = pairings({}, outputs=RunOutputs(loggers=("csv",)))  # logs are named after one record: alone
    assert group(logged, True) == [[p] for p in logged]


def test_a_cell_time_limit_is_the_pairing_limit_times_its_pairings():
    assert time_limit(30, 1) == (30, "timed out after 30 s")
    assert time_limit(30, 3) == (90, "timed out after 90 s (--timeout 30 s x 3 pairings trained together)")


def _comparable(record: dict) -> dict:
    """A record without what differs between two trainings of one configuration: times, and how many replicas
    trained together."""
    train = {k: v for k, v in record["train"].items() if k not in ("wall_seconds", "replicas", "stacking")}
    provenance = {k: v for k, v in record["provenance"].items() if k != "started_at"}
    return {**record, "train": train, "provenance": provenance}


def test_cells_of_seeds_write_the_records_of_pairings_trained_one_by_one(tmp_path, capsys):
    suite = str(write_suite(tmp_path, SWEPT_SUITE))
    folders = {mode: tmp_path / mode for mode in ("seeds", "off")}
    for mode, folder in folders.items():
        assert main(["run", "--suite", suite, "--out", str(folder), "--cells", mode, "--jobs", "1", "-q"]) == 0
        output = capsys.readouterr()
        assert sum(line.startswith("[") for line in output.out.splitlines()) == 6  # a progress line per pairing
        assert ("as 3 cells of seeds trained together" in output.err) == (mode == "seeds")
    seeds, off = ({p.name: json.loads(p.read_text()) for p in record_files(f)} for f in folders.values())
    assert sorted(seeds) == sorted(off) and len(seeds) == 6
    for name, record in seeds.items():
        assert record["status"] == "ok" and record["config_hash"] in name
        trained = record["model"] != "last-token"
        assert record["train"].get("replicas") == (4 if trained else None)  # 2 seeds x 2 rates
        assert off[name]["train"].get("replicas") == (2 if trained else None)  # 2 rates
        assert _comparable(record) == _comparable(off[name])  # metrics, curves, budget curve: bit for bit


@pytest.mark.parametrize("act", ["raise", "nan"])
def test_a_pairing_of_a_cell_that_raises_or_diverges_fails_alone(tmp_path, act):
    pairings = walk_pairings(CELL_MODEL, act=act, draw=draw_of(1))
    out = tmp_path / "runs"
    out.mkdir()
    executor = make_executor("local", out, None, jobs=1, pending=len(pairings))
    run_grid(pairings, executor, PlainProgress(pairings, Console(file=io.StringIO())), PairingLocks(out, {}), True)
    records = {r["seed"]: r for r in load_records(out).records.values()}
    assert [records[s]["status"] for s in SEEDS] == ["ok", "failed", "ok"]
    failed = records[1]
    assert failed["failure"]["phase"] == "train"
    expected = {"raise": "RuntimeError: raised on purpose by one replica", "nan": "NonFiniteLossError: "}[act]
    assert failed["error"].startswith(expected)
    # A raise stops the whole stack, so the cell was tried one by one; a divergence left the others training.
    assert {records[s]["train"].get("replicas") for s in (0, 2)} == {None if act == "raise" else 3}
    prov = trainer_provenance(None, 1)
    for seed in (0, 2):  # each the record it gets alone
        assert _comparable(records[seed]) == _comparable(execute(pairings[seed], prov))


@pytest.mark.parametrize("end", ["killed", "timeout"])
def test_a_worker_ended_mid_cell_fails_the_unfinished_pairings_and_keeps_the_finished(tmp_path, end):
    marks = tmp_path / "marks"
    marks.mkdir()
    finished = walk_pairings(CELL_MODEL, seeds=(0, 1), act="hang", marks=str(marks))  # draws nothing: trains
    hanging = walk_pairings(CELL_MODEL, seeds=(0, 1), act="hang", draw=draw_of(1), marks=str(marks))
    out = tmp_path / "runs"
    out.mkdir()
    executor = LocalExecutor(out, None, jobs=1, threads=1, timeout=TIMEOUT if end == "timeout" else None)
    try:
        executor.submit(*finished)
        done = []
        while len(done) < 2:
            done += executor.wait()
        assert [record["status"] for _, record in done] == ["ok", "ok"]
        kept = {path.name: path.read_bytes() for path in record_files(out)}
        started = time.monotonic()
        executor.submit(*hanging)
        if end == "killed":
            assert wait_until(lambda: any(marks.iterdir()), LIMIT_SECONDS)
            executor.workers[0].process.kill()
        ended = executor.wait()
    finally:
        executor.close(abort=True)
    assert sorted(p.seed for p, _ in ended) == [0, 1]  # the replica that hung and its cell-mate
    failures = {record["error"] for _, record in ended}
    if end == "killed":
        assert {record["failure"]["signal"] for _, record in ended} == {"SIGKILL"}
    else:
        assert time.monotonic() - started >= 2 * TIMEOUT
        assert failures == {time_limit(TIMEOUT, 2)[1]}
    assert all(record["status"] == "failed" for _, record in ended)
    assert {path.name: path.read_bytes() for path in record_files(out) if path.name in kept} == kept
    assert len(record_files(out)) == 4
