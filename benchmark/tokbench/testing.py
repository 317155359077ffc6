"""The conformance kit: the checks every task and model plugin must pass.

Subclass a conformance class in a test file and name what to check::

    # tests/test_conformance.py of a plugin
    from tokbench.testing import TaskConformance

    class TestMyTask(TaskConformance):
        tasks = ["my-task"]          # models = [...] chooses the partners (default: see below)

:class:`TaskConformance` checks each selected task, and trains it for one step
with each selected model; :class:`ModelConformance` is the mirror image for
models, on each selected task. Names may be glob patterns (``"*"``). Leaving the
partners unset (``models`` of a task's checks, ``tasks`` of a model's) selects the
built-ins and what the checked names' own plugins register, never another
installed plugin (ask for those by name or pattern), so that one plugin's checks
neither depend on nor grow with the rest of the ecosystem. Leaving both unset
selects the built-ins.

The module is also a pytest plugin. Enable it in ``conftest.py`` with
``pytest_plugins = ["tokbench.testing"]`` to choose names at run time: the
options ``--tokbench-task NAME`` and ``--tokbench-model NAME`` (repeatable)
override the class attributes, and the ini options ``tokbench_tasks`` and
``tokbench_models`` apply where a class sets nothing.

Everything runs at small split sizes (the parameters ``train_size``,
``val_size`` and ``test_size``, where a task declares them) with each model's
default parameters, so a full check costs seconds per pairing. The parameter
checks go further: a task draws a small split, and a model runs a forward pass,
at every declared choice and at both ends of every declared range, and at each
of the spec's ``examples``; so do the Bayes checks of a task (its optimum and its
log-probabilities), which the leaderboard's normalised scores rest on. A model that
predicts at every position is checked to be causal: tokens at and after a position
never change the logits before it. A spec whose plugin declares no
``TOKBENCH_CONTRACT`` fails a check saying what to declare. A pairing that the specs
declare not applicable (a model that predicts only the last position on a task
scored at many) is skipped with the reason.
"""
from __future__ import annotations

import fnmatch
import math
from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING, Any

import pytest

from tokbench.errors import NotApplicable, ParamError, UsageError
from tokbench.params import Param
from tokbench.hookspecs import CONTRACT, CONTRACT_ATTRIBUTE
from tokbench.plugins import origin, registry
from tokbench.specs import ModelSpec, TaskSpec

if TYPE_CHECKING:  # torch is imported only when a check runs, so that collection stays fast
    import torch

    from tokbench.harness import PairingResult
    from tokbench.model import TokenModel
    from tokbench.task import Split, Task

SMALL_SPLIT = 64  # samples per split in the checks that train or inspect splits
BAYES_SAMPLES = 20_000  # sample for the Bayes-predictor check at the defaults
LOSS_SAMPLES = 1_000  # the least sample on which the cross-entropy is compared with bayes_loss()
CAUSALITY_SEQUENCES = 8
BAYES_P_VALUE = 6.3e-5  # two-sided binomial test at about 4 standard errors
SEEDS = (0, 1)
KINDS = ("task", "model")


# --- the pytest plugin -------------------------------------------------------------------------

def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("tokbench", "tokbench conformance kit")
    for kind in KINDS:
        group.addoption(f"--tokbench-{kind}", action="append", dest=f"tokbench_{kind}s", metavar="NAME",
                        help=f"check this registered {kind} (repeatable); overrides the test classes' `{kind}s`")
        parser.addini(f"tokbench_{kind}s", f"registered {kind} names to check where a test class names none",
                      type="args", default=[])


def pytest_report_header(config: pytest.Config) -> str:
    reg = registry()
    return f"tokbench: {len(reg.tasks)} tasks and {len(reg.models)} models registered"


def _given(config: pytest.Config, cls: type | None, kind: str) -> list[str]:
    """The ``kind`` names or patterns asked for: command line, else class attribute, else ini option."""
    names = config.getoption(f"tokbench_{kind}s", default=None) or getattr(cls, f"{kind}s", None)
    if names is None:
        try:
            names = config.getini(f"tokbench_{kind}s")
        except ValueError:  # the plugin is not enabled, so the ini option is not declared
            names = []
    return list(names)


def _resolve(kind: str, names: Sequence[str]) -> list[str]:
    """Registered ``kind`` names for ``names`` (names or glob patterns); an unknown name or a pattern that
    matches nothing fails collection with one line."""
    reg = registry()
    specs = reg.tasks if kind == "task" else reg.models
    resolved: list[str] = []
    for name in names:
        if any(c in name for c in "*?["):
            matches = sorted(fnmatch.filter(specs, name))
            if not matches:
                raise UsageError(f"{kind} pattern {name!r} matches no registered {kind}")
        else:
            matches = [(reg.task if kind == "task" else reg.model)(name).name]  # the registry's one-line error
        resolved += [m for m in matches if m not in resolved]
    return resolved


def selected(config: pytest.Config, cls: type | None, kind: str) -> list[str]:
    """The ``kind`` names to check (see the module's docstring): those asked for; unset, the built-ins and the
    names registered by the plugins of the other kind's asked-for names."""
    names = _given(config, cls, kind)
    if names:
        return _resolve(kind, names)
    other = "model" if kind == "task" else "task"
    reg = registry()
    owners = {(reg.task if other == "task" else reg.model)(name).entry_point
              for name in _resolve(other, _given(config, cls, other))}
    specs = reg.tasks if kind == "task" else reg.models
    return sorted(name for name, spec in specs.items() if origin(spec) == "builtin" or spec.entry_point in owners)


# --- shared helpers ----------------------------------------------------------------------------

def small_params(spec: TaskSpec) -> dict[str, Any]:
    """Split sizes shrunk to :data:`SMALL_SPLIT`, for the sizes the task declares."""
    sizes = {}
    for p in spec.params:
        if p.name in ("train_size", "val_size", "test_size"):
            sizes[p.name] = max(min(p.default, SMALL_SPLIT), p.low or 0)
    return sizes


def hosted_task(spec: TaskSpec, given: dict[str, Any] | None = None) -> Task:
    """The task of ``spec`` at ``given`` as tokbench runs it: the checks are of what the host sees (an older
    contract's task through the adapter's wrapper, :func:`tokbench.compat.adapt_task`)."""
    from tokbench.compat import adapt_task

    return adapt_task(spec.create(given))


def hosted_model(spec: ModelSpec, params: dict[str, Any], task: Task) -> TokenModel:
    """The model of ``spec`` as tokbench runs it (:func:`tokbench.compat.build_model`)."""
    from tokbench.compat import build_model

    return build_model(spec, params, task)


@cache
def small_task(name: str) -> Task:
    """The registered task ``name`` with its split sizes shrunk (see :func:`small_params`), as the host runs it."""
    spec = registry().task(name)
    return hosted_task(spec, small_params(spec))


@cache
def build(model_name: str, task_name: str) -> tuple[TokenModel, Split]:
    """The model with default parameters, fitted on the task's small training split, from init seed 0."""
    import torch

    task, spec = small_task(task_name), registry().model(model_name)
    reason = spec.applicability(task.spec)
    if reason:
        pytest.skip(f"not applicable: {reason}")
    train = task.make_split("train", 0)
    torch.manual_seed(0)
    try:
        model = hosted_model(spec, spec.resolve(), task)
    except (UsageError, NotApplicable) as exc:  # a declared incompatibility, e.g. a vocabulary larger than the embedding
        pytest.skip(f"model {model_name!r} refuses task {task_name!r}: {exc}")
    model.fit(train)
    return model, train


@cache
def pairing(task_name: str, model_name: str) -> PairingResult:
    """Run the pairing through the harness for at most two optimiser steps, at seed 0."""
    from tokbench.harness import run_pairing

    build(model_name, task_name)  # skips the pairing if the model refuses the task
    spec = registry().model(model_name)
    recipe = spec.recipe.override({"steps": min(spec.recipe.steps, 2), "lr_grid": ()})
    return run_pairing(small_task(task_name), spec, spec.resolve(), recipe, seed=0, accelerator="cpu")


def _out_of_range(p: Param) -> list[Any]:
    """Values that ``p`` must reject: outside its choices or range, or of the wrong type."""
    bad: list[Any] = []
    if p.choices is not None:
        numeric = all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in p.choices)
        bad.append(max(p.choices) + 1 if numeric else "<not-a-choice>")
    else:
        wrap = (lambda v: (v,)) if p.type == "floats" else (lambda v: v)
        if p.low is not None:
            bad.append(wrap(p.low - 1))
        if p.high is not None:
            bad.append(wrap(p.high + 1))
    if p.type != "str":
        bad.append("not-a-number" if p.type != "bool" else "maybe")
    return bad


def check_param_validation(spec: TaskSpec | ModelSpec) -> None:
    """Defaults resolve; unknown names and every out-of-range or mistyped value raise ParamError."""
    spec.resolve()
    with pytest.raises(ParamError):
        spec.resolve({"no_such_parameter": 1})
    for p in spec.params:
        for value in _out_of_range(p):
            with pytest.raises(ParamError):
                spec.resolve({p.name: value})
                pytest.fail(f"{spec.kind} {spec.name!r} accepted {p.name}={value!r}; declared: {p.allowed()}")


def check_metadata(spec: TaskSpec | ModelSpec) -> None:
    """What the leaderboard and ``tokbench ls`` show must be there."""
    for attribute in ("name", "version", "description", "implementation"):
        value = getattr(spec, attribute)
        assert isinstance(value, str) and value.strip(), (
            f"{spec.kind} {spec.name!r}: {attribute} must be a non-empty string")


def check_contract(spec: TaskSpec | ModelSpec) -> None:
    """The spec's plugin declares the contract this tokbench serves; an older one runs only through an adapter."""
    assert spec.contract == CONTRACT, (
        f"{spec.kind} {spec.name!r}: its plugin's hook module declares contract {spec.contract} (no "
        f"{CONTRACT_ATTRIBUTE} is contract 1), so it runs through an adapter; migrate it and declare "
        f"{CONTRACT_ATTRIBUTE} = {CONTRACT} (CONTRIBUTING.md, Migrating to contract {CONTRACT})")


def check_causal(model: TokenModel, task: Task) -> None:
    """A model that predicts at every position is causal: for each cut t, tokens at and after t, changed at random,
    leave the logits at every position before t unchanged."""
    import torch

    from tokbench.harness import predict

    tokens = task.make_split("test", 0).tokens[:CAUSALITY_SEQUENCES]
    T = tokens.shape[1]
    logits = predict(model, tokens, need_attention=False).logits
    if logits.dim() != 3:
        pytest.skip("the model predicts only after the last token on this task")
    if not torch.equal(logits, predict(model, tokens, need_attention=False).logits):
        pytest.skip("a stochastic model (two calls on the same tokens differ): its logits cannot be compared")
    generator = torch.Generator().manual_seed(0)
    for t in sorted({1, T // 2, T - 1} - {0, T}):
        changed = tokens.clone()
        changed[:, t:] = torch.randint(0, task.vocab_size, changed[:, t:].shape, generator=generator)
        after = predict(model, changed, need_attention=False).logits
        assert torch.allclose(logits[:, :t], after[:, :t], rtol=1e-4, atol=1e-5), (
            f"changing the tokens at positions {t}..{T - 1} changed the logits before position {t}: the model reads "
            "future tokens, which a model predicting at every position must not (it would score above the task's "
            "Bayes optimum)")


@cache
def bayes_samples(task_name: str) -> list[tuple[str, Task, Split]]:
    """``(where, task, sample)``: :data:`BAYES_SAMPLES` fresh sequences at the task's defaults, and the small test
    split at each declared setting (:func:`declared_settings`) that the task accepts, the draw that
    :meth:`TaskConformance.test_every_declared_setting_generates` checks (some settings take seconds per draw).
    What the Bayes checks run on, since a normalised score rests on the optimum wherever a suite sets a task."""
    import torch

    spec = registry().task(task_name)
    task = small_task(task_name)
    samples = [("", task, task.generate(BAYES_SAMPLES, torch.Generator().manual_seed(12345)))]
    for given in declared_settings(spec):
        try:
            task = hosted_task(spec, {**small_params(spec), **given})
            samples.append((f" at {given}", task, task.make_split("test", 0)))
        except UsageError as exc:
            _refused(spec, given, exc)
            continue  # ruled out by the task's validate(), or no data can be drawn (said in one line)
    return samples


def check_bayes_predictor(task: Task, sample: Split, where: str = "") -> None:
    """``bayes_predict`` on ``sample`` reaches ``bayes_accuracy()`` within sampling error."""
    import torch
    from scipy.stats import binomtest

    from tokbench.harness import align
    from tokbench.metrics import sequence_accuracy

    n = len(sample)
    prediction = task.bayes_predict(sample.tokens)
    assert prediction.shape == sample.labels.shape, f"bayes_predict: shape {tuple(prediction.shape)}{where}"
    bayes = task.bayes_accuracy()
    if sample.labels.dim() == 2:  # per-sequence fractions: a z-test at about 4 standard errors
        per_sequence = sequence_accuracy(align(torch.nn.functional.one_hot(prediction.clamp(min=0), task.vocab_size),
                                               sample.labels), sample.labels)
        _within_sampling_error(f"the Bayes predictor{where}: accuracy", per_sequence.double(), bayes, unit=True)
        return
    hits = int((prediction == sample.labels).sum())
    p_value = binomtest(hits, n, bayes).pvalue
    assert p_value >= BAYES_P_VALUE, (
        f"Bayes predictor{where}: {hits / n:.4f} on {n} samples, bayes_accuracy() = {bayes:.4f} "
        f"(binomial test p = {p_value:.2g})")


def check_pairing(task_name: str, model_name: str) -> None:
    """One pairing through the harness: finite losses over the steps taken, metrics in range."""
    result = pairing(task_name, model_name)
    model, _ = build(model_name, task_name)
    spec = registry().model(model_name)
    trains = spec.trained and any(p.requires_grad for p in model.parameters())
    expected_steps = min(spec.recipe.steps, 2) if trains else 0
    assert result.train["steps"] == expected_steps, f"took {result.train['steps']} steps, expected {expected_steps}"
    losses = result.curve["loss"]
    assert losses or result.train["steps"] == 0, "a model that trains logs its loss"
    assert all(math.isfinite(x) for x in losses), f"training loss is not finite: {losses}"
    task = small_task(task_name)
    fractions = {"accuracy", "bayes_accuracy", *task.make_split("test", 0).attention_targets}
    for name, choice in result.diagnostics.items():
        assert name in fractions, f"diagnostic {name} has no attention target"
        assert set(choice) == {"kind", "layer", "head"}, f"diagnostic {name}: {choice}"
    for name, value in result.metrics.items():
        check_metric(name, value, fractions)
    if result.attention_profile is not None:
        assert len(result.attention_profile) == task.context_length, (
            f"attention profile over {len(result.attention_profile)} positions, expected {task.context_length}")


def check_metric(name: str, value: float, fractions: set[str] = frozenset()) -> None:
    """A reported metric is finite and in the range its name declares: ``_accuracy``, ``_attention``, ``agree_``
    and the attention targets' metrics (``fractions``) in [0, 1], ``correlation`` in [-1, 1], the losses and
    standard errors >= 0 (``normalized_accuracy`` and ``excess_loss`` may leave those ranges by sampling error)."""
    assert isinstance(value, (int, float)) and math.isfinite(value), f"metric {name} = {value}"
    if name in fractions or name.startswith("agree_") or (
            name.endswith(("_accuracy", "_attention")) and name != "normalized_accuracy"):
        assert 0.0 <= value <= 1.0, f"metric {name} = {value} lies outside [0, 1]"
    elif name.endswith("correlation"):
        assert -1.0 <= value <= 1.0, f"metric {name} = {value} lies outside [-1, 1]"
    elif name in ("loss", "bayes_loss") or name.endswith("_se"):
        assert value >= 0.0, f"metric {name} = {value} is negative"


class _Conformance:
    """Parametrises each check over the selected names (see :func:`selected`)."""

    tasks: Sequence[str] | None = None
    models: Sequence[str] | None = None

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        for kind in KINDS:
            if f"{kind}_name" in metafunc.fixturenames:
                metafunc.parametrize(f"{kind}_name", selected(metafunc.config, metafunc.cls, kind))


# --- the checks --------------------------------------------------------------------------------

class TaskConformance(_Conformance):
    """Checks of a task plugin; set ``tasks`` to the names to check."""

    def test_metadata(self, task_name: str) -> None:
        check_metadata(registry().task(task_name))

    def test_declares_the_contract(self, task_name: str) -> None:
        check_contract(registry().task(task_name))

    def test_param_validation(self, task_name: str) -> None:
        check_param_validation(registry().task(task_name))

    def test_tokens_and_labels_in_vocabulary(self, task_name: str) -> None:
        task = small_task(task_name)
        assert task.vocab_size >= 2 and task.context_length >= 1, (
            f"vocab_size {task.vocab_size} and context_length {task.context_length}")
        for name in ("train", "val", "test"):
            check_split(task, task.make_split(name, 0), task.split_size(name), name)

    def test_every_declared_setting_generates(self, task_name: str) -> None:
        spec = registry().task(task_name)
        for given in declared_settings(spec):
            try:
                task = hosted_task(spec, {**small_params(spec), **given})
                split = task.make_split("test", 0)
            except UsageError as exc:
                _refused(spec, given, exc)
                continue  # ruled out by the task's validate(), or no data can be drawn (said in one line)
            check_split(task, split, task.split_size("test"), f"test split at {given}")

    def test_same_seed_same_split(self, task_name: str) -> None:
        task = small_task(task_name)
        for name in ("train", "val", "test"):
            first, second = task.make_split(name, 0), task.make_split(name, 0)
            assert _same(first, second), f"the {name} split of seed 0 differs between two draws"

    def test_different_splits_differ(self, task_name: str) -> None:
        task = small_task(task_name)
        train, val, test = (task.make_split(name, 0) for name in ("train", "val", "test"))
        assert not _same(train, val) and not _same(train, test) and not _same(val, test), "splits of seed 0 coincide"
        assert not _same(train, task.make_split("train", 1)), "seeds 0 and 1 give the same training split"

    def test_bayes_accuracy_in_unit_interval(self, task_name: str) -> None:
        bayes = small_task(task_name).bayes_accuracy()
        assert 0.0 <= bayes <= 1.0, f"bayes_accuracy() = {bayes}"

    def test_bayes_predictor_reaches_bayes_accuracy(self, task_name: str) -> None:
        for where, task, sample in bayes_samples(task_name):
            check_bayes_predictor(task, sample, where)

    def test_bayes_log_probs_are_normalised_and_consistent(self, task_name: str) -> None:
        checked = 0
        for where, task, sample in bayes_samples(task_name):
            if task.bayes_log_probs(sample.tokens[:1]) is None:
                assert task.bayes_loss() is None, f"bayes_loss() is given, but bayes_log_probs() is not{where}"
                continue
            check_bayes_log_probs(task, sample, where)
            checked += 1
        if not checked:
            pytest.skip("the task gives no Bayes log-probabilities")

    def test_attention_targets_point_at_valid_positions(self, task_name: str) -> None:
        task = small_task(task_name)
        check_attention_targets(task.make_split("test", 0))

    def test_one_training_step_with_every_model(self, task_name: str, model_name: str) -> None:
        check_pairing(task_name, model_name)


class ModelConformance(_Conformance):
    """Checks of a model plugin on each selected task; set ``models`` to the names to check."""

    def test_metadata(self, model_name: str) -> None:
        check_metadata(registry().model(model_name))

    def test_declares_the_contract(self, model_name: str) -> None:
        check_contract(registry().model(model_name))

    def test_predictions_are_causal(self, model_name: str, task_name: str) -> None:
        spec = registry().model(model_name)
        if spec.predicts != "every" or spec.oracle:
            pytest.skip("an oracle reads the task's answer" if spec.oracle else "the model predicts only at the end")
        model, _ = build(model_name, task_name)
        check_causal(model, small_task(task_name))

    def test_param_validation(self, model_name: str) -> None:
        check_param_validation(registry().model(model_name))

    def test_forward_on_every_task(self, model_name: str, task_name: str) -> None:
        model, train = build(model_name, task_name)
        check_forward(model, small_task(task_name), train, registry().model(model_name).predicts)

    def test_every_declared_setting_builds(self, model_name: str, task_name: str) -> None:
        import torch

        build(model_name, task_name)  # skips a pairing that is not applicable
        spec, task = registry().model(model_name), small_task(task_name)
        tokens = task.make_split("test", 0)
        for given in declared_settings(spec):
            torch.manual_seed(0)
            try:
                model = hosted_model(spec, spec.resolve(given), task)
            except ParamError as exc:
                _refused(spec, given, exc)
                continue  # a combination the model rules out for this task, e.g. d not a multiple of heads
            except NotApplicable:
                continue  # a setting this task cannot take, e.g. a context longer than the model's table
            check_forward(model, task, tokens, spec.predicts, f" at {given}")

    def test_one_training_step_on_every_task(self, model_name: str, task_name: str) -> None:
        check_pairing(task_name, model_name)

    def test_one_step_of_its_recipe_moves_the_weights(self, model_name: str, task_name: str) -> None:
        import copy

        import torch

        from tokbench.optim import make_optimizer

        model, train = build(model_name, task_name)
        recipe = registry().model(model_name).recipe
        model = copy.deepcopy(model)  # the cached model stays untouched for the other checks
        trainable = [p for p in model.parameters() if p.requires_grad]
        if not trainable or recipe.steps == 0 or not registry().model(model_name).trained:
            assert pairing(task_name, model_name).train["steps"] == 0, "a model without training took steps"
            return
        before = [p.detach().clone() for p in trainable]
        from tokbench.harness import align

        output = model(train.tokens)
        loss = model.loss(output._replace(logits=align(output.logits, train.labels)), train.labels)
        assert bool(torch.isfinite(loss)), f"loss {loss.item()}"
        loss.backward()
        make_optimizer(recipe, trainable).step()
        assert any(not torch.equal(b, p) for b, p in zip(before, trainable)), "one step left every weight unchanged"


def declared_settings(spec: TaskSpec | ModelSpec) -> list[dict[str, Any]]:
    """One-parameter settings at every declared choice and at both ends of every declared range,
    then the spec's own ``examples``: what the kit checks beyond the defaults."""
    settings: list[dict[str, Any]] = []
    for p in spec.params:
        if p.name in ("train_size", "val_size", "test_size"):
            continue
        values = list(p.choices) if p.choices is not None else [v for v in (p.low, p.high) if v is not None]
        for value in values:
            if p.type == "int":
                value = int(value)
            elif p.type == "floats":
                value = (float(value),)
            elif p.type == "float":
                value = float(value)
            if value != p.default:
                settings.append({p.name: value})
    return settings + [dict(example) for example in spec.examples]


def _refused(spec: TaskSpec | ModelSpec, given: dict[str, Any], error: Exception) -> None:
    """A declared setting the spec refuses: fine for a range end or choice on its own (another parameter's default
    may rule it out), a failure for one of the spec's own ``examples``, which it declares valid."""
    if given in [dict(example) for example in spec.examples]:
        raise AssertionError(f"{spec.name} refuses its own example {given}: {error}") from error


def check_split(task: Task, split: Split, n: int, where: str) -> None:
    """Shapes and dtypes by the task's scoring, tokens and labels in the vocabulary, a scored position per row."""
    import torch

    from tokbench.task import IGNORE

    V, T = task.vocab_size, task.context_length
    assert split.tokens.dtype == torch.int64 and split.labels.dtype == torch.int64, f"{where}: dtypes"
    assert split.tokens.shape == (n, T), f"{where}: tokens {tuple(split.tokens.shape)}, expected {(n, T)}"
    expected = (n,) if task.spec.scoring == "last" else (n, T)
    assert split.labels.shape == expected, f"{where}: labels {tuple(split.labels.shape)}, expected {expected}"
    labels = split.labels[split.labels != IGNORE] if task.spec.scoring == "positions" else split.labels
    for what, values in (("tokens", split.tokens), ("labels", labels)):
        assert 0 <= int(values.min()) and int(values.max()) < V, f"{where}: {what} outside [0, {V})"
    assert bool(split.scored.any(1).all()), f"{where}: a sequence has no scored position"
    for name, reference in split.references.items():
        assert reference.shape == split.labels.shape and reference.dtype == torch.int64, (
            f"{where}: reference {name!r} must be int64 shaped like the labels")
    check_attention_targets(split)


def check_bayes_log_probs(task: Task, sample: Split, where: str = "") -> None:
    """``bayes_log_probs`` on ``sample``: shaped ``(n, V)`` or ``(n, T, V)`` like the labels, no NaN or +inf,
    each scored row a distribution (``-inf`` is a token of probability 0), every label possible, its argmax
    reaching ``bayes_accuracy()`` and its cross-entropy ``bayes_loss()`` within sampling error (where given)."""
    import torch

    from tokbench.harness import align
    from tokbench.metrics import sequence_accuracy

    n, V = len(sample), task.vocab_size
    log_probs = task.bayes_log_probs(sample.tokens)
    expected = (*sample.labels.shape, V)
    assert tuple(log_probs.shape) == expected, f"bayes_log_probs{where}: shape {tuple(log_probs.shape)}, expected {expected}"
    assert log_probs.is_floating_point(), f"bayes_log_probs{where}: dtype {log_probs.dtype}, expected a float"
    log_probs = log_probs.double()
    scored = sample.scored if sample.labels.dim() == 2 else torch.ones(n, dtype=torch.bool)
    rows = log_probs[scored]
    assert not bool(torch.isnan(rows).any()) and not bool((rows == math.inf).any()), (
        f"bayes_log_probs{where}: NaN or +inf (a token of probability 0 is -inf)")
    totals = rows.exp().sum(-1)
    assert torch.allclose(totals, torch.ones_like(totals), atol=1e-4), (
        f"bayes_log_probs{where}: scored rows sum to {float(totals.min()):.6f}..{float(totals.max()):.6f} in probability, "
        "not 1")
    labels = sample.labels.clamp(min=0)
    picked = log_probs.gather(-1, labels[..., None])[..., 0]
    assert bool(torch.isfinite(picked[scored]).all()), f"bayes_log_probs{where}: a sampled label has probability 0"
    per_sequence = sequence_accuracy(align(log_probs, sample.labels), sample.labels).double()
    _within_sampling_error(f"the argmax of bayes_log_probs{where}: accuracy", per_sequence, task.bayes_accuracy(),
                           unit=True)
    exact = task.bayes_loss()
    if exact is not None:
        assert math.isfinite(exact) and exact >= 0, f"bayes_loss() = {exact}: a cross-entropy is finite and >= 0"
        if n < LOSS_SAMPLES:
            return  # a cross-entropy is unbounded: its standard error from a small sample is not to be trusted
        per_sequence_loss = -(torch.where(scored, picked, 0.0).sum(-1) / scored.sum(-1)) if picked.dim() == 2 \
            else -picked
        _within_sampling_error(f"the cross-entropy of bayes_log_probs{where}", per_sequence_loss, exact)


def _within_sampling_error(what: str, per_sequence: torch.Tensor, claimed: float, unit: bool = False) -> None:
    """The sample mean of ``per_sequence`` lies within about four standard errors of ``claimed``. For values in
    [0, 1] (``unit``) the standard error is at least the largest such a variable can have, sqrt(c (1 - c) / n): a
    small sample of a heavy-tailed fraction (a few bad sequences among many perfect ones) underestimates it."""
    n = len(per_sequence)
    mean, se = per_sequence.mean().item(), per_sequence.std().item() / math.sqrt(n)
    if unit:
        se = max(se, math.sqrt(max(claimed * (1 - claimed), 0.0) / n))
    assert abs(mean - claimed) <= 4 * se + 1e-9, (
        f"{what} {mean:.4f} +- {se:.4f} on {len(per_sequence)} sequences, but the task claims {claimed:.4f}")


def check_attention_targets(split: Split) -> None:
    """Each target: a valid kind, weights shaped like the queries, a mask or rows summing to 1 where counted."""
    import torch

    from tokbench.task import AttentionTarget

    n, T = split.tokens.shape
    for name, target in split.attention_targets.items():
        assert isinstance(name, str) and name, "attention target names are non-empty strings"
        assert isinstance(target, AttentionTarget), f"{name}: expected an AttentionTarget, got {type(target)}"
        weights = target.weights
        shape = (n, T) if split.labels.dim() == 1 else (n, T, T)
        assert tuple(weights.shape) == shape, f"{name}: shape {tuple(weights.shape)}, expected {shape}"
        if target.queries is not None:
            assert split.labels.dim() == 2, f"{name}: queries apply to a task scored at many positions"
            assert target.queries.dtype == torch.bool and tuple(target.queries.shape) == (n, T), (
                f"{name}: queries must be an (n, T) bool mask")
            assert bool(target.queries.any(1).all()), f"{name}: a sequence has no query row"
        rows = weights if split.labels.dim() == 1 else weights[target.rows(split.labels)]  # the counted queries
        if target.kind == "mass":
            assert bool(((rows == 0) | (rows == 1)).all()), f"{name}: a mass target is a 0/1 mask"
            assert bool((rows != 0).any(-1).all()), f"{name}: some rows mark no position"
        else:
            total = rows.double().sum(-1)
            assert bool((rows >= 0).all()) and torch.allclose(total, torch.ones_like(total), atol=1e-6), (
                f"{name}: distribution rows must be non-negative and sum to 1")


def check_forward(model: TokenModel, task: Task, split: Split, predicts: str, where: str = "") -> None:
    """Logits shaped by what the model predicts, finite; attention (n, L, H, Q, T + S) with rows summing to 1."""
    import torch

    from tokbench.harness import predict

    n, T, V = len(split), task.context_length, task.vocab_size
    output = predict(model, split.tokens)
    shapes = [(n, V)] if predicts == "last" else [(n, T, V), *([(n, V)] if task.spec.scoring == "last" else [])]
    assert tuple(output.logits.shape) in shapes, f"logits {tuple(output.logits.shape)}, expected {shapes[0]}{where}"
    assert bool(torch.isfinite(output.logits).all()), f"logits are not finite{where}"
    if output.attention is not None:
        assert output.attention.dim() == 5, f"attention must be (n, L, H, Q, T + S){where}"
        queries = 1 if output.logits.dim() == 2 else T  # one query where only the last position is predicted
        _check_attention("attention", output.attention, (n, *output.attention.shape[1:3], queries), T)


def _check_attention(name: str, weights: torch.Tensor, leading: tuple[int, ...], T: int) -> None:
    """(*leading, T + S) weights, S >= 0 extra slots, non-negative, each row summing to 1."""
    import torch

    assert weights.dim() == len(leading) + 1 and tuple(weights.shape[:-1]) == leading, (
        f"{name} has shape {tuple(weights.shape)}, expected {(*leading, 'T + S')}")
    assert weights.shape[-1] >= T, f"{name} covers {weights.shape[-1]} positions, fewer than the {T} inputs"
    assert bool((weights >= 0).all()), f"{name} has negative weights"
    total = weights.double().sum(-1)
    assert torch.allclose(total, torch.ones_like(total), atol=1e-4), (
        f"{name} rows sum to {float(total.min()):.6f}..{float(total.max()):.6f}, not 1")


def _same(a: Split, b: Split) -> bool:
    """Two splits are identical, tokens, labels and attention targets."""
    import torch

    if a.tokens.shape != b.tokens.shape or a.attention_targets.keys() != b.attention_targets.keys():
        return False
    return (torch.equal(a.tokens, b.tokens) and torch.equal(a.labels, b.labels)
            and all(t.equals(b.attention_targets[k]) for k, t in a.attention_targets.items())
            and a.references.keys() == b.references.keys()
            and all(torch.equal(r, b.references[k]) for k, r in a.references.items()))
