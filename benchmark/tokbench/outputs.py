"""What a run writes besides its records: Lightning training logs and per-sample outputs.

Neither is part of a pairing's identity, and the leaderboard reads neither. Both go under
the records folder (``--out``), named by the record they belong to (its file name without
``.json``, its *stem*):

- training logs (``--logger csv|tensorboard|wandb``, suite key ``[outputs] loggers``): Lightning's
  own loggers, under ``logs/STEM/``; their step is the optimiser step (a stack of replicas, such as
  a sweep's candidates, logs each one's metrics with the suffix ``_I``, I its place in the sweep);
- per-sample outputs (``--log-samples``, suite key ``[outputs] log_samples``): ``STEM.samples.jsonl``
  beside the record, in the format of :func:`sample_lines` (``docs/api.md``);
- checkpoints of a training in progress (``--checkpoint-every``): ``.checkpoints/STEM.pt``, removed once the
  record is made (:mod:`tokbench.checkpoints`).
"""
from __future__ import annotations

import importlib.util
import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tokbench.errors import UsageError
from tokbench.storage import atomic_write

if TYPE_CHECKING:
    import torch

    from tokbench.checkpoints import Checkpoints
    from tokbench.task import Split, Task

#: Lightning logger by name, and the package it needs beyond Lightning (None: nothing more)
LOGGERS = {"csv": None, "tensorboard": "tensorboard", "wandb": "wandb"}
#: other packages that serve a logger (Lightning's TensorBoardLogger writes with tensorboardX without tensorboard)
ALTERNATIVES = {"tensorboard": ("tensorboardX",)}
LOGS_FOLDER = "logs"
SAMPLES_SUFFIX = ".samples.jsonl"
SAMPLES_FORMAT = "tokbench-samples/1"
MAX_SAMPLE_SEQUENCES = 10_000  # the first sequences of the split, at most this many ...
DEFAULT_CHECKPOINT_EVERY = 600.0  # seconds: at most 10 minutes of training lost to a kill, for a few MB written
MAX_SAMPLE_TOKENS = 2**20  # ... and at most this many of their tokens in all: a file of a few tens of MB at most


def check_loggers(names: Sequence[str]) -> tuple[str, ...]:
    """``names`` as a tuple, each a known logger whose package is installed; else a one-line :class:`UsageError`."""
    for name in names:
        if name not in LOGGERS:
            raise UsageError(f"unknown logger {name!r}; allowed: {', '.join(LOGGERS)}")
        package = LOGGERS[name]
        serving = (package, *ALTERNATIVES.get(name, ())) if package is not None else ()
        if not serving or any(importlib.util.find_spec(p) is not None for p in serving):
            continue
        alternatives = "".join(f" (or {p})" for p in ALTERNATIVES.get(name, ()))
        ready = ", ".join(n for n, p in LOGGERS.items() if p is None)
        raise UsageError(f"logger {name!r} needs the {package} package, which is not installed: pip install "
                         f"{package}{alternatives}; {ready} needs nothing more")
    return tuple(dict.fromkeys(names))


@dataclass(frozen=True)
class RunOutputs:
    """Where and what a run writes besides its records.

    ``folder`` is the records folder; ``loggers`` name Lightning loggers (:data:`LOGGERS`);
    ``log_samples`` writes per-sample outputs; ``callbacks`` are Lightning callbacks added to every
    Trainer (picklable: they travel to the worker processes). ``name`` is the stem of the record
    the outputs belong to, set per pairing by :meth:`named`. ``checkpoint_every``: seconds of training
    between two checkpoints (0: none).
    """

    folder: Path | None = None
    loggers: tuple[str, ...] = ()
    log_samples: bool = False
    callbacks: tuple[Any, ...] = ()
    name: str = "run"
    checkpoint_every: float = DEFAULT_CHECKPOINT_EVERY

    def named(self, name: str) -> RunOutputs:
        return replace(self, name=name)

    def checkpoints(self) -> Checkpoints | None:
        """Where the training of the named record checkpoints (None without a folder or with ``checkpoint_every`` 0)."""
        from tokbench.checkpoints import FOLDER, SUFFIX, Checkpoints

        if self.folder is None or self.checkpoint_every <= 0:
            return None
        return Checkpoints(self.folder / FOLDER / f"{self.name}{SUFFIX}", self.checkpoint_every)

    def lightning_loggers(self) -> list[Any]:
        """New Lightning loggers, one per name, writing under ``folder/logs/NAME/`` (a new version per Trainer)."""
        import pytorch_lightning as pl

        if self.folder is None or not self.loggers:
            return []
        save_dir = str(self.folder / LOGS_FOLDER)
        made = {"csv": lambda: pl.loggers.CSVLogger(save_dir, name=self.name),
                "tensorboard": lambda: pl.loggers.TensorBoardLogger(save_dir, name=self.name),
                "wandb": lambda: pl.loggers.WandbLogger(name=self.name, save_dir=save_dir, project="tokbench")}
        return [made[name]() for name in self.loggers]

    @property
    def samples_path(self) -> Path | None:
        return None if self.folder is None else self.folder / f"{self.name}{SAMPLES_SUFFIX}"

    def write_samples(self, task: Task, split: Split, predictions: torch.Tensor) -> Path | None:
        """Write the per-sample outputs of ``split`` (see :func:`sample_lines`) beside the record."""
        path = self.samples_path
        if path is None:
            return None
        return atomic_write(path, "".join(line + "\n" for line in sample_lines(task, split, predictions, self.name)))


def sample_lines(task: Task, split: Split, predictions: torch.Tensor, record: str) -> list[str]:
    """The JSON lines of a samples file: a header, then one object per sequence.

    Header: ``format`` (``"tokbench-samples/1"``), ``record`` (its stem), ``task``, ``split``,
    ``scoring``, ``sequences`` (in the split) and ``written`` (the first ones, at most
    :data:`MAX_SAMPLE_SEQUENCES` and :data:`MAX_SAMPLE_TOKENS` tokens in all). Each sequence:
    ``index``, ``tokens``, ``label``, ``prediction`` (the model's argmax, as scored),
    ``bayes_prediction``, ``bayes_label_probability`` and ``bayes_prediction_probability`` (what the
    task's Bayes predictor gives the label and the model's prediction; null where the task gives
    no Bayes probabilities). A task scored at many positions has one value per position in each of
    these, null where a position is not scored.
    """
    import torch

    from tokbench.task import IGNORE

    n, T = split.tokens.shape
    written = min(n, MAX_SAMPLE_SEQUENCES, max(1, MAX_SAMPLE_TOKENS // T))
    tokens, labels, predictions = split.tokens[:written], split.labels[:written], predictions[:written]
    bayes = task.bayes_predict(tokens)
    log_probs = task.bayes_log_probs(tokens)
    probability = (lambda picked: None) if log_probs is None else (
        lambda picked: log_probs.double().exp().gather(-1, picked.clamp(min=0)[..., None])[..., 0])
    scored = labels != IGNORE
    columns = {"label": labels, "prediction": predictions, "bayes_prediction": bayes,
               "bayes_label_probability": probability(labels), "bayes_prediction_probability": probability(predictions)}

    def value(column: torch.Tensor | None, i: int) -> Any:
        if column is None:
            return None
        if labels.dim() == 1:
            return column[i].item()
        return [x if keep else None for x, keep in zip(column[i].tolist(), scored[i].tolist())]

    header = {"format": SAMPLES_FORMAT, "record": record, "task": task.spec.name, "split": task.eval_split,
              "scoring": task.spec.scoring, "sequences": n, "written": written}
    rows = [{"index": i, "tokens": tokens[i].tolist(), **{key: value(column, i) for key, column in columns.items()}}
            for i in range(written)]
    return [json.dumps(entry, allow_nan=False) for entry in (header, *rows)]
