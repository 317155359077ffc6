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

from tokbench.errors import ParamError
from tokbench.hookspecs import CONTRACT
from tokbench.params import Param, resolve

if TYPE_CHECKING:  # heavy imports only for type checkers
    from tokbench.model import TokenModel
    from tokbench.task import Task

OPTIMIZERS = ("gd", "ngd", "adam", "adamw", "sgd")
SCHEDULES = ("constant", "cosine", "linear")
SCORINGS = ("last", "positions")  # where a task is scored (TaskSpec.scoring)
PREDICTS = ("last", "every")  # which positions a model predicts (ModelSpec.predicts)
DATA = ("fixed", "fresh")  # what a recipe trains on (Recipe.data)
VALIDATE_BY = ("labels", "expected")  # what validation reads (Recipe.validate_by)


@dataclass(frozen=True)
class Recipe:
    """How a model is trained by default; every field can be overridden with ``--set train.KEY=...``.

    The fields, their types, ranges and help are declared once, in :data:`RECIPE_PARAMS`
    below; the defaults are these class attributes. Every field is recorded in a run
    record's ``params.train`` and is part of its config hash.
    """

    optimizer: str = "adam"
    lr: float = 1e-2
    steps: int = 200
    batch_size: int = 0
    lr_grid: tuple[float, ...] = ()
    weight_decay: float = 0.0
    wd_grid: tuple[float, ...] = ()
    sweep_steps: int = 0
    sweep_margin: float = 0.0
    momentum: float = 0.0
    betas: tuple[float, ...] = (0.9, 0.999)
    schedule: str = "constant"
    warmup_steps: int = 0
    grad_clip: float = 0.0
    data: str = "fixed"
    target: float = 0.0
    patience: int = 0
    min_delta: float = 0.0
    eval_every: int = 100
    budgets: tuple[int, ...] = (100, 300, 1000, 3000)
    validate_by: str = "labels"

    def __post_init__(self) -> None:
        for p in RECIPE_PARAMS:
            object.__setattr__(self, p.name, p.check(getattr(self, p.name)))
        if len(self.betas) != 2:
            raise ParamError(f"betas={format_floats(self.betas)} must be two numbers, e.g. 0.9,0.999")
        if self.momentum and self.optimizer != "sgd":
            raise ParamError(f"momentum={self.momentum:g} needs optimizer=sgd (got {self.optimizer})")
        if not self.takes_weight_decay and (self.weight_decay or self.wd_grid):
            raise ParamError("optimizer=ngd takes no weight decay; use gd, sgd, adam or adamw")
        object.__setattr__(self, "budgets", tuple(sorted(set(self.budgets))))
        if self.sweep_steps and self.stops_early and self.sweep_steps % self.eval_every:
            raise ParamError(f"sweep_steps={self.sweep_steps} must be a multiple of eval_every={self.eval_every}")
        if self.sweep_margin and not self.sweep_steps:
            raise ParamError(f"sweep_margin={self.sweep_margin:g} needs sweep_steps (the step it keeps candidates at)")
        if self.data == "fresh" and self.batch_size == 0:
            raise ParamError("data=fresh draws batch_size new sequences per step; set batch_size >= 1")

    @property
    def stops_early(self) -> bool:
        """Whether validation accuracy is checked every ``eval_every`` steps (a target or a patience is set)."""
        return bool(self.target or self.patience)

    @property
    def takes_weight_decay(self) -> bool:
        """Whether the optimizer has a weight decay (normalised GD has none)."""
        return self.optimizer != "ngd"

    def override(self, given: Mapping[str, Any]) -> Recipe:
        """Return a copy with ``given`` applied, validated like any parameter."""
        current = self.to_json()
        declared = tuple(replace(p, default=current[p.name]) for p in RECIPE_PARAMS)
        return Recipe(**resolve(declared, given, "the training recipe"))

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def identity(self) -> dict[str, Any]:
        """The recipe as a run's identity (``params.train``) holds it: the keys added since record schema 3 only
        where they differ from their defaults, and schema 2's ``early_stop`` at 0 (off; ``target`` replaced it),
        so that a recipe which uses none of the new keys keeps the config hash its records already have."""
        current, defaults = self.to_json(), Recipe().to_json()
        kept = {key: value for key, value in current.items()
                if key not in SCHEMA_3_KEYS or value != defaults[key]}
        return {**kept, "early_stop": 0.0}

    def candidates(self) -> list[Recipe]:
        """The recipes a sweep trains: every ``lr_grid`` x ``wd_grid`` pair (each grid defaults to
        its single value), in grid order; without grids, this recipe alone."""
        if not (self.lr_grid or self.wd_grid):
            return [self]
        return [replace(self, lr=lr, weight_decay=wd, lr_grid=(), wd_grid=())
                for lr in self.lr_grid or (self.lr,) for wd in self.wd_grid or (self.weight_decay,)]

    @property
    def prunes(self) -> bool:
        """Whether the sweep keeps some candidates at ``sweep_steps`` (the best and, with ``sweep_margin``, those
        within it; or the first to reach its target) and trains only those on."""
        return 0 < self.sweep_steps < self.steps and len(self.candidates()) > 1

    def replica_steps(self) -> int:
        """The most replica-steps one seed trains: every candidate to the cap, or to ``sweep_steps`` and then the
        kept one to the cap (an early stop trains fewer); with a ``sweep_margin`` every candidate may be within it,
        so at most a full sweep's."""
        candidates = len(self.candidates())
        if self.prunes and not self.sweep_margin:
            return self.sweep_steps * candidates + self.steps - self.sweep_steps
        return self.steps * candidates

    def describe(self) -> str:
        batch = "full batch" if self.batch_size == 0 else f"batch {self.batch_size}"
        when = f" at step {self.sweep_steps}" if self.prunes else ""
        if self.prunes and self.sweep_margin:
            when += f" (with every candidate within {self.sweep_margin:g} of the best there, chosen at the end)"
        swept = [f"{name} chosen on validation{when} from {format_floats(grid)}"
                 for name, grid in (("lr", self.lr_grid), ("weight decay", self.wd_grid)) if grid]
        parts = [self.optimizer, *(swept or [f"lr {self.lr:g}"])]
        if self.weight_decay and not self.wd_grid:
            parts.append(f"weight decay {self.weight_decay:g}")
        if self.momentum:
            parts.append(f"momentum {self.momentum:g}")
        if self.schedule != "constant" or self.warmup_steps:
            warmup = f"{self.warmup_steps} warm-up steps then " if self.warmup_steps else ""
            parts.append(f"{warmup}{self.schedule} schedule")
        parts += [f"{self.steps} steps" if not self.stops_early else f"at most {self.steps} steps", batch]
        if self.data == "fresh":
            parts.append("fresh sequences every step")
        if self.grad_clip:
            parts.append(f"gradient norm clipped at {self.grad_clip:g}")
        if self.target:
            parts.append(f"stop at {self.target:g} x the oracle's validation accuracy")
        if self.validate_by == "expected":
            parts.append("validation accuracy taken in expectation over the task's label law")
        if self.patience:
            parts.append(f"stop after {self.patience} steps without a validation gain of {self.min_delta:g}")
        if self.stops_early:
            parts.append(f"validation checked every {self.eval_every} steps")
        return ", ".join(parts)


def candidate_key(lr: float, weight_decay: float, crosses_weight_decay: bool) -> str:
    """The name of one sweep candidate in a record's ``train.lr_selection_*`` fields: its learning rate, and its
    weight decay where the sweep crosses weight decays (a non-empty ``wd_grid``)."""
    return f"lr={lr:g},wd={weight_decay:g}" if crosses_weight_decay else f"{lr:g}"


def format_floats(values: tuple[float, ...]) -> str:
    return "/".join(f"{x:g}" for x in values)


_DEFAULT = Recipe.__dataclass_fields__
RECIPE_PARAMS: tuple[Param, ...] = tuple(Param(name, kind, _DEFAULT[name].default, help_text, **limits) for name, kind, help_text, limits in (
    ("optimizer", "str", "gd: gradient descent; ngd: normalised GD (grad / ||grad||_F); adam; adamw; sgd: with "
     "momentum", {"choices": OPTIMIZERS}),
    ("lr", "float", "learning rate (the peak rate under a schedule)", {"low": 0.0}),
    ("steps", "int", "optimiser steps (0: no gradient training)", {"low": 0}),
    ("batch_size", "int", "samples per step; 0 means the full training split", {"low": 0}),
    ("lr_grid", "floats", "if given, train once per lr (x each wd_grid value) and keep the best on the validation "
     "split", {"low": 0.0}),
    ("weight_decay", "float", "weight decay (decoupled for adamw, L2 for gd, sgd and adam)", {"low": 0.0}),
    ("wd_grid", "floats", "if given, sweep these weight decays (with lr_grid), best on validation", {"low": 0.0}),
    ("sweep_steps", "int", "with a sweep: at this step keep the candidate with the best validation accuracy and "
     "train only it on to the cap, or sooner the first to reach its target (0: every candidate to the cap, chosen "
     "at the end)", {"low": 0}),
    ("sweep_margin", "float", "with sweep_steps: also keep every candidate whose validation accuracy there is within "
     "this much of the best; the kept ones train on to their own stops and the best of them on validation at the "
     "end is chosen (0: the best alone)", {"low": 0.0, "high": 1.0}),
    ("momentum", "float", "momentum of sgd", {"low": 0.0, "high": 0.999}),
    ("betas", "floats", "beta1,beta2 of adam and adamw", {"low": 0.0, "high": 0.9999}),
    ("schedule", "str", "learning-rate schedule after the warm-up: constant, cosine or linear decay to 0",
     {"choices": SCHEDULES}),
    ("warmup_steps", "int", "steps of linear warm-up from lr/warmup_steps to lr", {"low": 0}),
    ("grad_clip", "float", "clip the gradient norm to this value before each step (0: off)", {"low": 0.0}),
    ("data", "str", "fixed: steps over the training split; fresh: batch_size new sequences from the task's "
     "generator at every step (drawn 10 steps at a time, each draw seeded from the run seed)", {"choices": DATA}),
    ("target", "float", "stop once validation accuracy reaches target x the oracle's validation accuracy (0: off)",
     {"low": 0.0, "high": 1.0}),
    ("patience", "int", "stop once validation accuracy has not gained min_delta for this many steps (0: off)",
     {"low": 0}),
    ("min_delta", "float", "the least gain in validation accuracy that counts as progress for patience",
     {"low": 0.0, "high": 1.0}),
    ("eval_every", "int", "steps between validation checks for target and patience", {"low": 1}),
    ("budgets", "ints", "steps at which the test accuracy is recorded in budget_curve (never used for a choice)",
     {"low": 1}),
    ("validate_by", "str", "what target, patience and sweeps read on the validation split: labels (accuracy on its "
     "drawn labels) or expected (that accuracy's expectation under the task's label law, its Bayes probabilities: "
     "no label noise)", {"choices": VALIDATE_BY}),
))

#: recipe keys added since record schema 3, kept out of a run's identity at their defaults (see
#: :meth:`Recipe.identity`)
SCHEMA_3_KEYS = ("data", "target", "patience", "min_delta", "budgets", "validate_by", "sweep_steps",
                 "sweep_margin")
#: recipe keys of older records and what became of them (see :func:`migrate_recipe`)
REMOVED_RECIPE_KEYS = {"early_stop": "target (a fraction of the oracle's validation accuracy)"}


def migrate_recipe(stored: Mapping[str, Any]) -> dict[str, Any]:
    """A stored recipe (a record's ``params.train``) in today's keys: a removed key at its old "off" value is
    dropped; one that was on cannot be rebuilt and raises :class:`ParamError` naming what replaced it."""
    migrated = dict(stored)
    for key, replacement in REMOVED_RECIPE_KEYS.items():
        if migrated.pop(key, 0):
            raise ParamError(f"train.{key}={stored[key]} was replaced by {replacement}: this recipe cannot be rebuilt")
    return migrated


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
    plugin: str = field(default="", compare=False)  # filled in by the plugin host: the distribution
    #: filled in by the plugin host: the entry-point name (the PLUGIN of ``PLUGIN:NAME``) and the
    #: contract its hook module declares (see :mod:`tokbench.hookspecs`)
    entry_point: str = field(default="", compare=False)
    contract: int = field(default=CONTRACT, compare=False)
    #: parameter settings that the conformance kit checks besides the defaults and the declared
    #: edges, e.g. ``({"heads": 4, "d": 16},)`` for a combination no single edge reaches
    examples: tuple[dict[str, Any], ...] = field(default=(), compare=False)

    @property
    def qualified_name(self) -> str:
        """``PLUGIN:NAME``, unique across the installed plugins (the bare name where no host filled it in)."""
        return self.name if ":" in self.name or not self.entry_point else f"{self.entry_point}:{self.name}"

    def resolve(self, given: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Validated parameters: ``given`` over the declared defaults."""
        return resolve(self.params, given or {}, f"{self.kind} {self.name!r}")

    def implementation_class(self) -> type:
        """The class ``implementation`` names, imported."""
        return _import(self.implementation)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "description": self.description,
            "citation": self.citation,
            "params": [p.to_json() for p in self.params],
            "plugin": self.plugin,
            "qualified_name": self.qualified_name,
        }


@dataclass(frozen=True)
class TaskSpec(_Spec):
    """Registration record of a task. ``implementation`` names a :class:`tokbench.task.Task` subclass.

    ``scoring`` says where the task is scored: ``"last"`` (one label per sequence, predicted after the
    last input) or ``"positions"`` (labels at many positions, see :class:`tokbench.task.Split`).
    ``difficulty`` names the parameters along which the task gets harder (context length, pairs,
    states, lag, ...): the only parameters a suite's ladder may vary (``docs/suites.md``).
    ``pitfall``, when set, says in one sentence which models the task traps and why (with its
    source); the tokbench scores report such a task in its own column, never averaged in.
    ``evaluation_axes`` names the declared parameters a trained model may also be evaluated at other
    values of (``("context_length",)``: the task's rule does not depend on it); ``evaluation_note``
    says in one sentence why a task declares none, and is the reason its evaluations are not applicable.
    """

    kind = "task"
    scoring: str = "last"
    difficulty: tuple[str, ...] = ()
    pitfall: str = ""
    evaluation_axes: tuple[str, ...] = ()
    evaluation_note: str = ""

    def __post_init__(self) -> None:
        if self.scoring not in SCORINGS:
            raise ValueError(f"task {self.name!r}: scoring must be one of {SCORINGS}, got {self.scoring!r}")
        declared = {p.name for p in self.params}
        for what, names in (("difficulty", self.difficulty), ("evaluation_axes", self.evaluation_axes)):
            unknown = [name for name in names if name not in declared]
            if unknown:
                raise ValueError(f"task {self.name!r}: {what} names undeclared parameters {unknown}")

    def create(self, given: Mapping[str, Any] | None = None) -> Task:
        """Import the implementation and instantiate it with validated parameters: the plugin's own object, which
        the host runs through :func:`tokbench.compat.adapt_task` (a wrapper where the plugin is of an older
        contract; the object itself is left as created)."""
        return self.implementation_class()(self, self.resolve(given))

    def to_json(self) -> dict[str, Any]:
        return {**super().to_json(), "scoring": self.scoring, "difficulty": list(self.difficulty),
                "pitfall": self.pitfall, "evaluation_axes": list(self.evaluation_axes),
                "evaluation_note": self.evaluation_note}


@dataclass(frozen=True)
class ModelSpec(_Spec):
    """Registration record of a model. ``implementation`` names a :class:`tokbench.model.TokenModel` subclass.

    ``family`` groups models that differ only in a setting (``"transformer"`` for ``transformer-2l``
    and ``transformer-4l``); the tokbench ladder plots draw one line per family. Empty: the name.
    ``fixed_length`` is empty when the model, built at the training context length, runs unchanged on
    longer sequences; otherwise one sentence saying why it cannot (learned absolute positions, say),
    which is the reason its evaluations at another context length are not applicable.
    ``oracle`` marks a reference predictor that knows the task (the task's own Bayes predictor):
    the leaderboard shows it but never ranks or bolds it.
    """

    kind = "model"
    recipe: Recipe = Recipe()
    predicts: str = "last"
    trained: bool = True
    family: str = ""
    fixed_length: str = ""
    oracle: bool = False

    @property
    def family_name(self) -> str:
        """The declared family, or the model's own name when it declares none."""
        return self.family or self.name

    def __post_init__(self) -> None:
        if self.predicts not in PREDICTS:
            raise ValueError(f"model {self.name!r}: predicts must be one of {PREDICTS}, got {self.predicts!r}")

    def applicability(self, task: TaskSpec) -> str | None:
        """Why this model cannot be paired with ``task``, or ``None`` when it can."""
        if task.scoring == "positions" and self.predicts == "last":
            return f"{self.name} predicts only the last position; {task.name} is scored at many positions"
        return None

    def build(self, params: Mapping[str, Any], task: Task) -> TokenModel:
        """Import the implementation and build the torch module for ``task``: the plugin's own object, which the
        host runs through :func:`tokbench.compat.adapt_model` (a wrapper where the plugin is of an older contract;
        the module itself is left as built)."""
        return self.implementation_class()(dict(params), task)

    def to_json(self) -> dict[str, Any]:
        return {**super().to_json(), "recipe": self.recipe.to_json(), "predicts": self.predicts,
                "trained": self.trained, "family": self.family_name, "fixed_length": self.fixed_length,
                "oracle": self.oracle}
