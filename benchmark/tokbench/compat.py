"""The adapter that keeps contract-1 plugins working under contract 2, without touching them.

A hook module that declares no ``TOKBENCH_CONTRACT`` was written for contract 1 (see
:mod:`tokbench.hookspecs`). Its specs create and build its tasks and models exactly as its author
wrote them (:meth:`~tokbench.specs.TaskSpec.create`, :meth:`~tokbench.specs.ModelSpec.build`), so
that the plugin's own code and its own tests keep seeing contract 1. The host (the harness, the
conformance kit) runs them through wrappers instead, which :func:`adapt_task` and
:func:`adapt_model` return (a contract-2 object comes back as it is):

- :class:`ContractOneModel`, around a model whose ``forward(tokens)`` lacks ``need_attention`` and
  returns the final query's attention as ``(n, T + S)``: it calls ``forward(tokens)`` and gives that
  attention as ``(n, 1, 1, 1, T + S)`` (one layer, one head, one query), only when asked for it;
  every other member is the model's own (parameters, ``state_dict`` under ``plugin.``, ``loss``, ...);
- :class:`ContractOneTask`, around a task: its splits' plain ``(n, T)`` mask targets become
  :class:`~tokbench.task.AttentionTarget` of kind ``"mass"`` (the contract-1 metric), and its
  ``model_metrics`` is handed a view of the model whose forward returns the contract-1 output (the
  logits of the last position and the final query's attention in the last layer, heads averaged,
  ``(n, T + S)``) and the split with its targets as the masks it drew.

Neither wrapper warns: the parent process of a run says once, before training, what each plugin's
author should change (:func:`contract_notes`, one line per plugin and change, naming the plugin and
the file of the class to change), and its workers stay silent.
"""
from __future__ import annotations

import inspect
from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from tokbench.hookspecs import CONTRACT, MIGRATION
from tokbench.model import ModelOutput, TokenModel
from tokbench.task import AttentionTarget, Split, Task

if TYPE_CHECKING:
    from tokbench.grid import Pairing
    from tokbench.specs import ModelSpec, TaskSpec

__all__ = ["MIGRATION", "ContractOneModel", "ContractOneTask", "ContractWarning", "adapt_model", "adapt_task",
           "build_model", "contract_notes"]


class ContractWarning(UserWarning):
    """A plugin of an older contract runs through the adapter; the message says what to change (issued by
    :func:`tokbench.api.run`, once per run)."""


def _takes_need_attention(forward: Any) -> bool:
    parameters = inspect.signature(forward).parameters.values()
    return any(p.name == "need_attention" or p.kind is p.VAR_KEYWORD for p in parameters)


class _FromMask(AttentionTarget):
    """An AttentionTarget that the adapter made of a contract-1 mask, and hands back as the mask to contract-1 code."""


def _contract_one(split: Split) -> Split:
    """``split`` as a contract-1 plugin drew it: the targets that the adapter made of plain masks, masks again."""
    if not any(isinstance(target, _FromMask) for target in split.attention_targets.values()):
        return split
    return replace(split, attention_targets={key: target.weights if isinstance(target, _FromMask) else target
                                             for key, target in split.attention_targets.items()})


def _contract_two(split: Split) -> Split:
    """``split`` with each plain mask target wrapped in an AttentionTarget of kind ``"mass"`` (a new Split: the one
    the plugin returned is left as it is)."""
    if all(isinstance(target, AttentionTarget) for target in split.attention_targets.values()):
        return split
    return replace(split, attention_targets={key: target if isinstance(target, AttentionTarget) else _FromMask(target)
                                             for key, target in split.attention_targets.items()})


class ContractOneModel(TokenModel):
    """A contract-1 model as the host runs it: ``forward(tokens, need_attention=False)`` with attention
    ``(n, 1, 1, 1, T + S)``. The model itself is the submodule ``plugin``, left as it was built: the wrapper's
    parameters are the model's (its ``state_dict`` keys under ``plugin.``; ``wrapper.plugin.state_dict()`` loads into
    a model the plugin builds), and every member the wrapper does not define is the model's own."""

    def __init__(self, model: TokenModel) -> None:
        nn.Module.__init__(self)  # not TokenModel's: params, vocab_size, ... are the model's own (__getattr__)
        self.plugin = model

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)  # nn.Module's: the submodule ``plugin``, parameters, buffers
        except AttributeError:
            plugin = self.__dict__.get("_modules", {}).get("plugin")
            if plugin is None:  # not built yet (a copy being made)
                raise
            return getattr(plugin, name)

    def forward(self, tokens: torch.Tensor, need_attention: bool = False) -> ModelOutput:
        output = self.plugin(tokens)
        attention = output.attention
        if attention is not None and attention.dim() == 2:
            attention = attention[:, None, None, None, :]
        return output._replace(attention=attention if need_attention else None)

    def fit(self, train: Split) -> None:
        self.plugin.fit(_contract_one(train))


def _delegated(name: str) -> Any:
    def method(self: ContractOneModel, *args: Any, **kwargs: Any) -> Any:
        return getattr(self.plugin, name)(*args, **kwargs)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"The model's own ``{name}``."
    return method


# The rest of the model contract is the model's own (a plugin may override any of it).
for _member, _value in vars(TokenModel).items():
    if callable(_value) and not _member.startswith("_") and _member not in vars(ContractOneModel):
        setattr(ContractOneModel, _member, _delegated(_member))
del _member, _value


class _ContractOneView:
    """A model seen through contract 1: ``view(tokens)`` returns ``(n, V)`` logits and ``(n, T + S)`` attention;
    every other attribute is the model's own."""

    def __init__(self, model: TokenModel) -> None:
        self._model = model

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self._model, attribute)

    def __call__(self, tokens: torch.Tensor) -> ModelOutput:
        output = self._model(tokens, need_attention=True)
        logits = output.logits[:, -1] if output.logits.dim() == 3 else output.logits
        attention = output.attention
        if attention is not None:  # (n, L, H, Q, T + S) -> last layer, heads averaged, final query: (n, T + S)
            attention = attention[:, -1].mean(1)[:, -1]
        return output._replace(logits=logits, attention=attention)


class ContractOneTask:
    """A contract-1 task as the host runs it: splits with AttentionTarget targets, and ``model_metrics`` given the
    contract-1 view of the model. The task itself is ``plugin``, left as it was created; every other attribute is
    its own (``spec``, ``params``, ``vocab_size``, the Bayes predictor, ...)."""

    def __init__(self, task: Task) -> None:
        self.plugin = task

    def __getattr__(self, name: str) -> Any:
        if name == "plugin":  # not set yet (a copy being made)
            raise AttributeError(name)
        return getattr(self.plugin, name)

    def __repr__(self) -> str:
        return f"ContractOneTask({self.plugin!r})"

    def generate(self, n: int, generator: torch.Generator) -> Split:
        return _contract_two(self.plugin.generate(n, generator))

    def training_batch(self, n: int, generator: torch.Generator) -> Split:
        return _contract_two(self.plugin.training_batch(n, generator))

    def make_split(self, split: str, seed: int) -> Split:
        return _contract_two(self.plugin.make_split(split, seed))

    def model_metrics(self, model: TokenModel, split: Split) -> dict[str, float]:
        return self.plugin.model_metrics(_ContractOneView(model), _contract_one(split))


def adapt_task(task: Task) -> Task:
    """The task as the host runs it: a contract-1 task (by its spec's contract) in a :class:`ContractOneTask`,
    anything else (an adapted task too) as it is."""
    if isinstance(task, ContractOneTask) or task.spec.contract >= CONTRACT:
        return task
    return ContractOneTask(task)  # type: ignore[return-value]  # a Task in all but its class


def adapt_model(model: TokenModel, spec: ModelSpec) -> TokenModel:
    """The model as the host runs it: a contract-1 model whose forward lacks ``need_attention`` in a
    :class:`ContractOneModel`, anything else as it is."""
    if isinstance(model, ContractOneModel) or spec.contract >= CONTRACT or _takes_need_attention(model.forward):
        return model
    return ContractOneModel(model)


def build_model(spec: ModelSpec, params: dict[str, Any], task: Task) -> TokenModel:
    """``spec``'s model as the host runs it (:func:`adapt_model`), built from the task its contract knows: a
    contract-1 model gets a contract-1 task's own object, not the host's wrapper of it."""
    seen = task.plugin if spec.contract < CONTRACT and isinstance(task, ContractOneTask) else task
    return adapt_model(spec.build(params, seen), spec)


# --- what the parent process says, once per run ------------------------------------------------------------

def _where(spec: TaskSpec | ModelSpec) -> str:
    """``name (Class in FILE)``: the registered name and the class its author changes, with its source file."""
    try:
        cls = spec.implementation_class()
        source = inspect.getsourcefile(cls) or cls.__module__
    except Exception:  # noqa: BLE001 - a class that does not import: its pairings' records say so
        return f"{spec.name} ({spec.implementation})"
    return f"{spec.name} ({cls.__qualname__} in {source})"


def _plain_targets(spec: TaskSpec, params: dict[str, Any]) -> list[str]:
    """The attention targets that the task draws as plain masks, on one sequence at ``params``."""
    try:
        split = spec.create(params).generate(1, torch.Generator().manual_seed(0))
    except Exception:  # noqa: BLE001 - not drawable here: the pairing's record will carry the error
        return []
    return sorted(key for key, target in split.attention_targets.items() if not isinstance(target, AttentionTarget))


def _changes(spec: TaskSpec | ModelSpec, params: dict[str, Any]) -> list[tuple[str, str]]:
    """``(change, what the adapter does and the author should do)`` for each change the spec's code needs."""
    try:
        cls = spec.implementation_class()
    except Exception:  # noqa: BLE001 - as in _where
        return []
    changes = []
    if spec.kind == "model":
        if not _takes_need_attention(cls.forward):
            changes.append(("forward", "forward(tokens) lacks need_attention; its attention, the final query's "
                            "(n, T + S), is read as (n, 1, 1, 1, T + S) (one layer, one head, one query); write "
                            "forward(tokens, need_attention=False) giving attention (n, L, H, Q, T + S)"))
        return changes
    plain = _plain_targets(spec, params)
    if plain:
        changes.append(("targets", f"attention targets {', '.join(plain)} are plain (n, T) masks, read as "
                        "AttentionTarget(mask) (the attention mass on the mask, last layer, heads averaged); wrap "
                        "each in tokbench.task.AttentionTarget"))
    if cls.model_metrics is not Task.model_metrics:
        changes.append(("metrics", "model_metrics is handed the contract-1 output: the last position's logits (n, V) "
                        "and the final query's attention (n, T + S) of the last layer, heads averaged, and the "
                        "targets as the masks drawn; read ModelOutput.attention as (n, L, H, Q, T + S)"))
    return changes


def contract_notes(pairings: Iterable[Pairing]) -> list[str]:
    """One line per plugin of an older contract and change its author should make, for the tasks and models of
    ``pairings``: the plugin (entry point and distribution), the tasks or models concerned with the class to change
    and its source file, what the adapter does meanwhile, what to write instead. Said once per run, by the parent,
    before training (``tokbench run``, :func:`tokbench.api.run`)."""
    specs: dict[tuple[str, str], tuple[TaskSpec | ModelSpec, dict[str, Any]]] = {}
    for pairing in pairings:
        for spec, params in ((pairing.task_spec, pairing.task_params), (pairing.model_spec, pairing.model_params)):
            if spec.contract < CONTRACT:
                specs.setdefault((spec.kind, spec.qualified_name), (spec, params))
    grouped: dict[tuple[str, str, str], tuple[TaskSpec | ModelSpec, str, list[str]]] = {}
    for spec, params in specs.values():
        for change, text in _changes(spec, params):
            grouped.setdefault((spec.entry_point, spec.kind, change), (spec, text, []))[2].append(_where(spec))
    return [f"plugin {spec.entry_point!r} ({spec.plugin}), contract {spec.contract}: {spec.kind}"
            f"{'s' if len(where) > 1 else ''} {', '.join(where)}: {text}; see {MIGRATION}"
            for spec, text, where in grouped.values()]
