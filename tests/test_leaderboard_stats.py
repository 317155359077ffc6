"""The leaderboard's statistics: interval coverage by simulation, range, and the tests behind every claim."""
from __future__ import annotations

import pytest
from scipy import stats as scipy_stats

from tokbench.leaderboard import stats
from tokbench.leaderboard.stats import ABOVE, BELOW, MATCHES, UNDECIDED, binomial_var, compare, differs, summarise

ACCURACY = (0.0, 1.0)


@pytest.fixture(scope="module")
def simulated():
    return stats.coverage_table()


@pytest.mark.parametrize("seed_sd", [0.03, 0.1])
def test_nominal_95_covers_93_to_97_percent_from_2_to_50_seeds(simulated, seed_sd):
    rates = {c.seeds: c.rate for c in simulated if c.seed_sd == seed_sd}
    assert sorted(rates) == [2, 3, 5, 10, 20, 50]
    assert all(0.93 <= rate <= 0.97 for rate in rates.values()), rates


def test_without_seed_variation_the_interval_is_conservative_not_wrong(simulated):
    rates = {c.seeds: c.rate for c in simulated if c.seed_sd == 0}
    assert all(0.95 <= rate <= 0.995 for rate in rates.values()), rates


def test_a_plain_t_interval_is_kept_where_seeds_vary_more_than_the_evaluation_set():
    values = [0.49, 0.5, 0.47, 0.52]
    stat = summarise(values, eval_var=binomial_var(0.495, 1000, 4), bounds=ACCURACY)
    low, high = scipy_stats.t.interval(0.95, 3, loc=sum(values) / 4, scale=scipy_stats.sem(values))
    assert (stat.low, stat.high) == (pytest.approx(low, abs=1e-12), pytest.approx(high, abs=1e-12))


def test_the_interval_stays_inside_the_metrics_range():
    stat = summarise([0.17, 1.0], bounds=ACCURACY)  # t with 1 degree of freedom: +-5.3 before the cut
    assert (stat.low, stat.high) == (0.0, 1.0) and stat.mean == pytest.approx(0.585)
    assert stats.metric_range("parent_attention") == ACCURACY
    assert stats.metric_range("svm_correlation") == (-1.0, 1.0)
    assert stats.metric_range("excess_loss") == stats.UNBOUNDED


def test_equal_seeds_still_carry_the_evaluation_sets_error():
    """Two seeds that both score 0.810 on 1000 test sequences: not an interval of width 0."""
    stat = summarise([0.81, 0.81], eval_var=binomial_var(0.81, 1000, 2), bounds=ACCURACY)
    assert stat.width == pytest.approx(2 * 1.959964 * (0.81 * 0.19 / 1000 / 2) ** 0.5, rel=0.01)
    perfect = summarise([1.0, 1.0, 1.0], eval_var=binomial_var(1.0, 1000, 3), bounds=ACCURACY)
    assert perfect.high == 1.0 and 0.99 < perfect.low < 1.0
    assert summarise([0.3]).interval is None


def test_the_mean_does_not_depend_on_the_order_of_the_seeds():
    values = [0.1, 0.2, 0.3, 1e-17, 0.7]
    assert stats.mean(values) == stats.mean(values[::-1]) and stats.variance([0.7] * 3) == 0.0


# ---- claims --------------------------------------------------------------------------------------------------------

def test_no_claim_under_three_seeds():
    """An untrained model at 0.225 +- 1.588 over 2 seeds once "reached the Bayes-optimal accuracy"."""
    assert compare([0.1, 0.35], [0.5, 0.5]).verdict is None
    assert differs([0.1, 0.35], 0.0, [0.9, 0.95], 0.0) is None


def test_interval_containing_the_optimum_is_not_a_match():
    """attn-paper-a (0.597 +- 0.412) once "reached the Bayes-optimal accuracy 0.800" (K=20, p=0.8)."""
    values = [0.45, 0.78, 0.56]
    comparison = compare(values, [0.8] * 3, binomial_var(0.597, 1000, 3))
    assert comparison.low < 0 < comparison.high  # the old rule saw the optimum inside the interval
    assert comparison.verdict == UNDECIDED


def test_two_seeds_at_0810_do_not_exceed_an_optimum_of_0800():
    """attn-rope (0.810 +- 0.000) once "exceeded the Bayes-optimal accuracy 0.800, beyond the 95% interval"."""
    assert compare([0.81, 0.81], [0.8, 0.8], binomial_var(0.81, 1000, 2)).verdict is None
    three = compare([0.81, 0.81, 0.81], [0.8] * 3, binomial_var(0.81, 1000, 3))
    assert three.verdict != ABOVE and three.low < 0


def test_matches_needs_equivalence_within_the_margin():
    close = compare([0.499, 0.502, 0.497, 0.5, 0.503], [0.5] * 5, binomial_var(0.5, 1000, 5))
    assert close.verdict == MATCHES
    # 0.49 is inside the interval of a few noisy seeds, but equivalence within 0.02 cannot be shown.
    noisy = compare([0.45, 0.53, 0.49], [0.5] * 3, binomial_var(0.49, 1000, 3))
    assert noisy.verdict == UNDECIDED
    # Equivalence margin: a tight cell 0.03 below the optimum is below, never a match.
    assert compare([0.47, 0.471, 0.469, 0.47], [0.5] * 4, binomial_var(0.47, 100000, 4)).verdict == BELOW


def test_at_chance_is_relative_to_the_named_reference():
    """"Stays at chance" was said of 0.512 where uniform scores 0.053: the reference must be the right one."""
    values = [0.512, 0.509, 0.515, 0.511, 0.508, 0.513]
    untrained = [0.51, 0.507, 0.514, 0.512, 0.509, 0.51]
    variance = 2 * binomial_var(0.511, 1000, 6)  # both terms are scored on 1000 sequences
    assert compare(values, untrained, variance).verdict == MATCHES  # at its own untrained accuracy
    assert compare(values, [0.053] * 6, variance).verdict == ABOVE  # far above a uniform guess
    # With 3 seeds, 1000 sequences cannot show equivalence within 0.02: no claim of chance is made.
    assert compare(values[:3], untrained[:3], 2 * binomial_var(0.511, 1000, 3)).verdict == UNDECIDED


def test_differs_is_a_welch_test_with_the_evaluation_floor():
    assert differs([0.9, 0.91, 0.92], binomial_var(0.91, 1000, 3), [0.5, 0.52, 0.51], binomial_var(0.51, 1000, 3))
    assert differs([0.5, 0.52, 0.51], binomial_var(0.51, 1000, 3), [0.51, 0.5, 0.52],
                   binomial_var(0.51, 1000, 3)) is False
    # Equal values on each side: only the evaluation sets' error is left, and it decides.
    assert differs([0.81] * 3, binomial_var(0.81, 1000, 3), [0.8] * 3, binomial_var(0.8, 1000, 3)) is False
