"""The gated families of plugins/tokbench_models/: gated linear attention (gla.py) and H3 (h3.py).

Each trains in a parallel form (GLA's chunks, H3's convolutions) and has its paper's recurrence as a reference
form; they must agree. Causality is tested with every family in test_models_families.py, running past the
training length in test_models_length.py, vmap in test_models_vmap.py.
"""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from models_support import build_model
from tokbench.errors import ParamError
from tokbench.harness import run_pairing
from tokbench.optim import make_optimizer, make_schedule
from tokbench.plugins import registry
from tokbench_models.gla import gla_chunked, gla_recurrent
from tokbench_models.h3 import DiagonalSSM, ShiftSSM

GATED = ("gla", "h3")


@pytest.fixture(scope="module")
def chain():
    """A Markov chain scored at every position, 37 long: not a multiple of GLA's chunk of 8."""
    return registry().task("markov-switch").create({"context_length": 37, "train_size": 4})


@pytest.mark.parametrize(("name", "params"), [("gla", {}), ("gla", {"heads": 2, "d": 16, "conv": 0}), ("h3", {}),
                                              ("h3", {"head_dim": 4, "d_state": 8})])
def test_the_parallel_form_equals_the_recurrent_reference(chain, name, params):
    model = build_model(name, chain, **params)
    tokens = chain.make_split("train", 0).tokens
    with torch.no_grad():
        parallel = model(tokens).logits
        for block in model.blocks:
            block.mixer.reference = True
        recurrent = model(tokens).logits
    assert parallel.shape == (len(tokens), 37, chain.vocab_size)
    torch.testing.assert_close(parallel, recurrent, atol=1e-5, rtol=1e-4)


def test_gla_chunks_equal_the_recurrence_with_gates_near_zero_and_one():
    """Gates from logsigmoid(10 z) span e^-30 to 1: the chunks never divide by a vanishing decay."""
    generator = torch.Generator().manual_seed(0)
    q, k, log_alpha = (torch.randn(2, 45, 3, 4, generator=generator) for _ in range(3))
    v = torch.randn(2, 45, 3, 8, generator=generator)
    log_alpha = F.logsigmoid(10 * log_alpha)
    assert float(log_alpha.min()) < -20
    reference = gla_recurrent(q, k, v, log_alpha)  # entries up to about 10: float32 rounding near 1e-5
    for chunk in (8, 1, 7, 64):  # any chunk length gives the same outputs
        torch.testing.assert_close(gla_chunked(q, k, v, log_alpha, chunk), reference, atol=1e-4, rtol=1e-4)


def test_h3_ssms_are_the_papers():
    """The shift SSM is a causal convolution with its taps C; the diagonal SSM's kernel is 2 Re(C B' A'^l) with the
    bilinear A' = (1 + dt A / 2) / (1 - dt A / 2), and starts at S4D-Lin: A = -1/2 + i pi m."""
    torch.manual_seed(0)
    shift = ShiftSSM(channels=3, state=4)
    u = torch.randn(2, 10, 3)
    with torch.no_grad():
        expected = sum(shift.taps[:, i] * F.pad(u, (0, 0, i, 0))[:, :10] for i in range(4)) + shift.skip * u
        torch.testing.assert_close(shift(u), expected)
        diagonal = DiagonalSSM(channels=2, state=6)
        A = torch.complex(-diagonal.log_neg_real.exp(), diagonal.imag)
        torch.testing.assert_close(A[0], torch.complex(torch.full((3,), -0.5), torch.pi * torch.arange(3.0)))
        dt = diagonal.log_dt.exp()[:, None]
        A_bar = (1 + dt * A / 2) / (1 - dt * A / 2)
        C = torch.complex(diagonal.C[..., 0], diagonal.C[..., 1])
        B_bar = dt / (1 - dt * A / 2)  # B = 1 at the start
        kernel = torch.stack([2 * (C * B_bar * A_bar ** step).sum(-1).real for step in range(5)], dim=-1)
        torch.testing.assert_close(diagonal.kernel(5), kernel, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize(("T", "N"), [(10, 4), (37, 64), (64, 64)])
def test_the_shift_ssms_toeplitz_form_is_its_convolution(T, N):
    """The CPU's form (a matmul with the taps' Toeplitz matrices) and the GPU's (a depthwise conv1d): the same
    outputs and gradients, for contexts shorter and longer than the taps."""
    torch.manual_seed(0)
    shift = ShiftSSM(channels=5, state=N)
    u = torch.randn(3, T, 5, requires_grad=True)
    (by_conv, grads_conv), (by_matmul, grads_matmul) = (
        (y, torch.autograd.grad(y.square().sum(), (u, shift.taps))) for y in (shift.convolution(u), shift.toeplitz(u)))
    torch.testing.assert_close(by_matmul, by_conv, atol=1e-5, rtol=1e-5)
    for a, b in zip(grads_matmul, grads_conv):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-5)


@pytest.mark.parametrize(("name", "params", "message"), [("gla", {"d": 12, "heads": 4}, "multiple of 2"),
                                                         ("h3", {"d": 12, "head_dim": 5}, "multiple of head_dim"),
                                                         ("h3", {"d_state": 7}, "even")])
def test_sizes_that_do_not_divide_are_parameter_errors(chain, name, params, message):
    with pytest.raises(ParamError, match=message):
        build_model(name, chain, **params)


@pytest.mark.parametrize("name", GATED)
def test_a_short_training_run_learns_associative_recall(name):
    """300 steps on mqar with 2 pairs of 16 tokens: well above the best input-independent guess (chance_accuracy,
    0.14 here). Measured at seed 0 on one thread: gla 0.998 (0.51 without its short convolution, conv = 0), h3 0.77."""
    task = registry().task("mqar").create({"vocab_size": 16, "num_kv_pairs": 2, "num_queries": 2, "context_length": 8,
                                           "train_size": 2000, "val_size": 200, "test_size": 500})
    spec = registry().model(name)
    recipe = spec.recipe.override({"steps": 300, "batch_size": 32, "eval_every": 100})
    metrics = run_pairing(task, spec, spec.resolve(), recipe, seed=0, accelerator="cpu").metrics
    assert metrics["chance_accuracy"] < 0.2 and metrics["accuracy"] > 0.4


def _h3_associative_recall(n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """H3's associative recall (Fu et al. 2023, Sec. 3.1; the generator of the authors' configs, HazyResearch/safari
    ``generate_assoc_recall`` with a vocabulary of 10 and 20 input tokens): 10 pairs of a key (tokens 0-3) and its
    value (4-7) under the sequence's own key-to-value map, then ``=>`` (8), a key that occurs in the pairs, its value.
    Inputs are the first 22 of those 23 tokens and labels the next token at every position (language modelling). The
    token ids differ from safari's (which sorts the tokens as strings) and the sequences are not de-duplicated."""
    keys = torch.randint(0, 4, (n, 10), generator=generator)
    table = torch.randint(4, 8, (n, 4), generator=generator)
    present = torch.zeros(n, 4, dtype=torch.bool).scatter_(1, keys, True)
    query = torch.rand(n, 4, generator=generator).masked_fill(~present, -1).argmax(1, keepdim=True)  # uniform
    pairs = torch.stack([keys, table.gather(1, keys)], 2).flatten(1)
    sequence = torch.cat([pairs, torch.full((n, 1), 8), query, table.gather(1, query)], 1)
    return sequence[:, :-1], sequence[:, 1:]


@pytest.mark.slow
def test_h3_solves_its_papers_associative_recall_at_the_papers_size():
    """Fu et al. report 99.8% for a 2-layer H3 (attention 100%, S4D 86.0%, random 25%); the authors' configs train it
    at width 32 as a language model on 5000 sequences for 200 epochs of batch 32 (31400 steps) at AdamW 5e-4, scored
    at the last token. Here the same model size, data and loss with h3's own recipe at 4 x that rate for 5000 steps (cosine decay
    to 0, no dropout). Measured at seed 0: 0.994 (0.99 and more from step 2500 on); the same run with its schedule
    ending at 2500 steps reaches 0.91, its rate decaying before the climb is over. The bar, 0.98, is the paper's
    figure less what one seed of a sixth of its training may miss."""
    generator = torch.Generator().manual_seed(0)
    train_tokens, train_labels = _h3_associative_recall(5000, generator)
    test_tokens, test_labels = _h3_associative_recall(500, generator)
    spec = registry().model("h3")
    shape = SimpleNamespace(vocab_size=10, context_length=22, spec=SimpleNamespace(scoring="positions"))
    torch.manual_seed(0)
    model = spec.build(spec.resolve({"d": 32}), shape)
    recipe = spec.recipe.override({"lr": 2e-3, "steps": 5000, "warmup_steps": 500, "batch_size": 32})
    optimizer = make_optimizer(recipe, model.parameters())
    schedule = make_schedule(recipe, optimizer)
    for _ in range(recipe.steps):
        rows = torch.randint(0, len(train_tokens), (recipe.batch_size,), generator=generator)
        loss = F.cross_entropy(model(train_tokens[rows]).logits.flatten(0, 1), train_labels[rows].flatten())
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), recipe.grad_clip)
        optimizer.step()
        schedule.step()
    with torch.no_grad():
        accuracy = (model.eval()(test_tokens).logits[:, -1].argmax(-1) == test_labels[:, -1]).float().mean().item()
    assert accuracy >= 0.98
