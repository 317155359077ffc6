"""Each positional encoding (plugins/tokbench_attention/positional.py) has its defining property."""
from __future__ import annotations

import math

import pytest
import torch

from tokbench.errors import ParamError
from tokbench_attention.positional import (
    ALiBi,
    LearnedAdded,
    NoPE,
    OrthogonalConcat,
    RoPE,
    SinusoidalAdded,
    T5Bias,
    alibi_slopes,
    sinusoid_table,
    t5_bucket,
)

PARAMS = {"base": 10000.0, "t5_buckets": 8, "t5_max_distance": 20, "positions": "onehot", "position_norm": 1.0}


def test_nope_changes_nothing():
    encoding = NoPE(PARAMS, length=7, width=4, heads=2)
    x = torch.randn(3, 7, 2, 2)
    assert encoding.table() is None
    assert encoding.bias(torch.tensor([6]), torch.arange(7)) is None
    assert torch.equal(encoding.rotate(x, torch.arange(7)), x)


def test_rope_scores_depend_only_on_the_offset():
    encoding = RoPE(PARAMS, length=64, width=8, heads=2)
    q, k = torch.randn(1, 1, 2, 4), torch.randn(1, 1, 2, 4)

    def score(m: int, l: int) -> torch.Tensor:
        rotated_q = encoding.rotate(q, torch.tensor([m]))
        rotated_k = encoding.rotate(k, torch.tensor([l]))
        return (rotated_q * rotated_k).sum(-1)

    for m, l, shift in [(5, 2, 17), (40, 40, 3), (9, 30, 21), (0, 33, 30)]:
        torch.testing.assert_close(score(m, l), score(m + shift, l + shift), rtol=1e-5, atol=1e-5)
    assert not torch.allclose(score(5, 2), score(5, 3))  # it does see the offset


def test_rope_is_a_rotation_and_the_identity_at_position_zero():
    encoding = RoPE(PARAMS, length=16, width=8, heads=1)
    x = torch.randn(3, 16, 1, 8)
    rotated = encoding.rotate(x, torch.arange(16))
    torch.testing.assert_close(rotated.norm(dim=-1), x.norm(dim=-1))
    torch.testing.assert_close(rotated[:, 0], x[:, 0])


def test_rope_needs_an_even_head_width():
    with pytest.raises(ParamError, match="even"):
        RoPE(PARAMS, length=4, width=6, heads=2)


@pytest.mark.parametrize("heads", [1, 2, 4, 8, 16])
def test_alibi_slopes_are_the_papers_geometric_sequence(heads):
    expected = torch.tensor([2.0 ** (-8.0 * (i + 1) / heads) for i in range(heads)])
    torch.testing.assert_close(alibi_slopes(heads), expected)


def test_alibi_slopes_for_eight_heads_and_for_a_non_power_of_two():
    torch.testing.assert_close(alibi_slopes(8), torch.tensor([1 / 2**i for i in range(1, 9)]))
    # 6 heads: the 4-head sequence, then every other slope of the 8-head one (Press et al., 2022)
    torch.testing.assert_close(alibi_slopes(6), torch.tensor([2**-2, 2**-4, 2**-6, 2**-8, 2**-1, 2**-3]))


def test_alibi_bias_is_minus_slope_times_distance():
    encoding = ALiBi(PARAMS, length=10, width=4, heads=2)
    bias = encoding.bias(torch.tensor([9]), torch.arange(10))  # (H, 1, L)
    distance = torch.arange(9, -1, -1).float()
    torch.testing.assert_close(bias[:, 0], -alibi_slopes(2)[:, None] * distance)
    assert list(encoding.parameters()) == []  # fixed, not learned


def test_t5_bias_is_shared_across_absolute_positions():
    encoding = T5Bias(PARAMS, length=60, width=4, heads=3)
    positions = torch.arange(60)
    bias = encoding.bias(positions, positions)  # (H, Q, L): every query position against every key
    for shift in (1, 7, 25):
        torch.testing.assert_close(bias[:, shift:, shift:], bias[:, :-shift, :-shift])
    assert encoding.learned.shape == (8, 3) and encoding.learned.requires_grad


def test_t5_buckets_are_exact_then_logarithmic_then_clamped():
    offsets = torch.arange(0, 200)
    buckets = t5_bucket(offsets, buckets=8, max_distance=20)
    assert buckets[:4].tolist() == [0, 1, 2, 3]  # exact below buckets / 2
    assert (buckets.diff() >= 0).all() and buckets.max() == 7
    assert buckets[20:].eq(7).all()  # from max_distance on, the last bucket
    assert t5_bucket(torch.tensor([-5]), 8, 20).item() == 0  # keys after the query share bucket 0


def test_t5_max_distance_must_exceed_the_exact_buckets():
    with pytest.raises(ParamError, match="t5_max_distance"):
        T5Bias({**PARAMS, "t5_max_distance": 4}, length=4, width=4, heads=1)


def test_sinusoids_follow_vaswani_and_shift_by_a_rotation():
    table = sinusoid_table(50, 6, base=10000.0)
    frequencies = 10000.0 ** (-torch.arange(0, 6, 2).double() / 6)
    assert table[7, 2].item() == pytest.approx(math.sin(7 * frequencies[1].item()), abs=1e-6)
    assert table[7, 3].item() == pytest.approx(math.cos(7 * frequencies[1].item()), abs=1e-6)
    # each (sin, cos) pair at pos + k is the pair at pos turned by k * frequency: relative offsets are linear maps
    pairs = table.double().view(50, 3, 2)
    angle = 5 * frequencies
    turned = torch.stack([pairs[..., 0] * angle.cos() + pairs[..., 1] * angle.sin(),
                          pairs[..., 1] * angle.cos() - pairs[..., 0] * angle.sin()], -1)
    torch.testing.assert_close(turned[:-5], pairs[5:], rtol=0, atol=1e-5)
    assert torch.equal(SinusoidalAdded(PARAMS, length=50, width=6, heads=1).table(), table)


def test_an_odd_width_keeps_the_sinusoid_table_width():
    assert sinusoid_table(5, 7, base=100.0).shape == (5, 7)


def test_learned_positions_are_a_trained_table():
    encoding = LearnedAdded(PARAMS, length=9, width=4, heads=1)
    assert encoding.table().shape == (9, 4) and encoding.table().requires_grad
    assert not encoding.concatenated


@pytest.mark.parametrize("positions", ["onehot", "sinusoidal"])
def test_concatenated_positions_are_orthogonal_with_equal_norms_as_in_paper_a(positions):
    norm = 3.0
    encoding = OrthogonalConcat({**PARAMS, "positions": positions, "position_norm": norm}, length=97, width=4, heads=1)
    table = encoding.table().double()
    assert encoding.concatenated and table.shape == (97, 97)
    torch.testing.assert_close(table @ table.T, norm**2 * torch.eye(97, dtype=torch.float64), rtol=0, atol=1e-4)
