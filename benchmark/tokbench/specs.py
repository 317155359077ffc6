"""Light descriptions of tasks and models: what plugins register.

A spec carries metadata, the declared parameters and, for models, the default
training recipe. It names its implementation as ``"module:attribute"`` so that
listing what is installed never imports torch; the implementation is imported
only when a run builds it (:meth:`TaskSpec.create`, :meth:`ModelSpec.build`).
"""
from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any

from tokbench.params import Param, resolve

if TYPE_CHECKING:  # heavy imports only for type checkers
    from tokbench.model import TokenModel
    from tokbench.task import Task

OPTIMIZERS = ("gd", "ngd", "adam")
SCORINGS = ("last", "positions")  # where a task is scored (TaskSpec.scoring)
PREDICTS = ("last", "every")  # which positions a model predicts (ModelSpec.predicts)

RECIPE_PARAMS: tuple[Param, ...] = (
    Param("optimizer", "str", "adam", "gd: gradient descent; ngd: normalised GD (grad / ||grad||_F); adam", choices=OPTIMIZERS),
    Param("lr", "float", 1e-2, "learning rate", low=0.0),
    Param("steps", "int", 200, "optimiser steps (0: no gradient training)", low=0),
    Param("batch_size", "int", 0, "samples per step; 0 means the full training split", low=0),
    Param("lr_grid", "floats", (), "if given, train once per lr and keep the best on the validation split", low=0.0),
)


@dataclass(frozen=True)
class Recipe:
    """How a model is trained by default; every field can be overridden with ``--set train.KEY=...``."""

    optimizer: str = "adam"
    lr: float = 1e-2
    steps: int = 200
    batch_size: int = 0
    lr_grid: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        for p in RECIPE_PARAMS:
            p.check(getattr(self, p.name))

    def override(self, given: Mapping[str, Any]) -> Recipe:
        """Return a copy with ``given`` applied, validated like any parameter."""
        current = self.to_json()
        declared = tuple(replace(p, default=current[p.name]) for p in RECIPE_PARAMS)
        return Recipe(**resolve(declared, given, "the training recipe"))

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def with_lr(self, lr: float) -> Recipe:
        """This recipe at one learning rate, without a grid."""
        return replace(self, lr=lr, lr_grid=())

    def describe(self) -> str:
        batch = "full batch" if self.batch_size == 0 else f"batch {self.batch_size}"
        lr = f"lr {self.lr:g}" if not self.lr_grid else "lr chosen on validation from " + "/".join(f"{x:g}" for x in self.lr_grid)
        return f"{self.optimizer}, {lr}, {self.steps} steps, {batch}"


def _import(path: str) -> Any:
    module, _, attr = path.partition(":")
    obj = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


@dataclass(frozen=True)
class _Spec:
    name: str
    version: str
    description: str
    implementation: str
    citation: str = ""
    params: tuple[Param, ...] = ()
    plugin: str = field(default="", compare=False)  # filled in by the plugin host

    def resolve(self, given: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Validated parameters: ``given`` over the declared defaults."""
        return resolve(self.params, given or {}, f"{self.kind} {self.name!r}")

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "description": self.description,
            "citation": self.citation,
            "params": [p.to_json() for p in self.params],
            "plugin": self.plugin,
        }


@dataclass(frozen=True)
class TaskSpec(_Spec):
    """Registration record of a task. ``implementation`` names a :class:`tokbench.task.Task` subclass.

    ``scoring`` says where the task is scored: ``"last"`` (one label per sequence, predicted after the
    last input) or ``"positions"`` (labels at many positions, see :class:`tokbench.task.Split`).
    """

    kind = "task"
    scoring: str = "last"

    def __post_init__(self) -> None:
        if self.scoring not in SCORINGS:
            raise ValueError(f"task {self.name!r}: scoring must be one of {SCORINGS}, got {self.scoring!r}")

    def create(self, given: Mapping[str, Any] | None = None) -> Task:
        """Import the implementation and instantiate it with validated parameters."""
        return _import(self.implementation)(self, self.resolve(given))

    def to_json(self) -> dict[str, Any]:
        return {**super().to_json(), "scoring": self.scoring}


@dataclass(frozen=True)
class ModelSpec(_Spec):
    """Registration record of a model. ``implementation`` names a :class:`tokbench.model.TokenModel` subclass."""

    kind = "model"
    recipe: Recipe = Recipe()
    predicts: str = "last"
    trained: bool = True

    def __post_init__(self) -> None:
        if self.predicts not in PREDICTS:
            raise ValueError(f"model {self.name!r}: predicts must be one of {PREDICTS}, got {self.predicts!r}")

    def applicability(self, task: TaskSpec) -> str | None:
        """Why this model cannot be paired with ``task``, or ``None`` when it can."""
        if task.scoring == "positions" and self.predicts == "last":
            return f"{self.name} predicts only the last position; {task.name} is scored at many positions"
        return None

    def build(self, params: Mapping[str, Any], task: Task) -> TokenModel:
        """Import the implementation and build the torch module for ``task``."""
        return _import(self.implementation)(dict(params), task)

    def to_json(self) -> dict[str, Any]:
        return {**super().to_json(), "recipe": self.recipe.to_json(), "predicts": self.predicts,
                "trained": self.trained}
