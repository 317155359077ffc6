"""Every statistic of the leaderboard: intervals across seeds, the tests behind each claim, seed means.

The data of one leaderboard cell are n per-seed values of a metric. Each seed
draws its own training *and evaluation* data, so the spread of those values
already holds both seed-to-seed variation and the evaluation set's sampling
error. Two things go wrong with a plain Student's t interval on them, and the
interval here fixes both:

- with few seeds the sample variance can be (near) zero by chance or by
  discreteness (two seeds that both score 0.810), which would claim a precision
  the finite evaluation set cannot give. The half-width is therefore never
  below the z half-width implied by the evaluation sets alone
  (``z * sqrt(eval_var / n)``, with ``eval_var`` the variance of one seed's
  value from its evaluation set: a binomial ``p(1-p)/m`` for an accuracy on m
  sequences, with the Agresti-Coull estimate of p so that 1.0 is not certain);
- t intervals can leave the metric's range (``0.657 ± 1.087``); the interval is
  cut to the range, which never lowers its coverage because the truth is inside.

So the 95% interval is the union of two valid 95% intervals: the t interval over
seeds (exact for normal seed values, any n >= 2) and the evaluation-set interval.
Its coverage is checked by simulation in the tests (:func:`coverage`); the
figures are printed in the protocol. A bootstrap was not used: with 2-5 seeds a
percentile bootstrap can only return values between the observed ones and
covers far below its nominal level.

Claims are tests on per-seed differences (a model's accuracy minus the
reference on the same seed's data, so the data's own variation cancels):
*matches* is an equivalence test (TOST: the 90% interval of the difference lies
inside +-``MARGIN``, i.e. two one-sided tests at 5%); *below* and *above* need
the 95% interval of the difference to exclude 0; *differs* compares two cells
with a Welch interval. No claim at all is made with fewer than ``MIN_SEEDS``
seeds.

Scores (:func:`weighted_sum`) are fixed weighted sums of independent cell means:
a task family's score is the mean over its ladder's rungs of each rung cell's
mean normalised accuracy, the overall score the mean of a model's family scores.
The rungs are the protocol's fixed settings, so the spread between rungs is part
of the definition of the score, not sampling error; the only randomness is each
cell's mean over its own seeds. The cells are independent (each has its own
seeds' training and data), so the variance of the estimate is
``sum(w_c**2 * v_c / n_c)``, with ``v_c`` the cell's per-seed sample variance
floored by the variance its evaluation set alone implies (the floor of the cell
intervals, as a variance). The cells' spreads and seed counts differ (adaptive
seeding), so the reference distribution is Student's t with the
Welch-Satterthwaite degrees of freedom ``(sum u_c)**2 / sum(u_c**2 / (n_c - 1))``
(``u_c = w_c**2 * v_c / n_c``), which is exact for one cell and the standard
approximation for several; the interval is cut to the metric's range. Two
models' scores share no cell, so their difference is again such a sum, and
:func:`compare_scores` tests it as :func:`compare` does a paired difference.
A cell with one seed has no variance: its score has no interval and no claim.
Coverage is checked by simulation (:func:`score_coverage`) on ladders with
unequal seed counts and spreads, each cell's seeds fixed in advance; ``tokbench run
--target-ci`` adds seeds until an interval is narrow, a data-dependent stopping rule
the simulations do not cover, which can lower the coverage of such cells.

Where the evaluation set's size is unknown (a task that declares no ``{split}_size``),
the floor cannot be computed: ``eval_var`` is None, and then :func:`summarise` gives no
interval, :func:`compare`, :func:`differs` and :func:`compare_scores` no claim, and
:func:`weighted_sum` no variance. A t interval alone could be of zero width there (every
seed at 1.000) and claim a precision nothing shows.

Each claim is a test at 5% on its own; no correction is made across the claims of a
page (only "equivalent to some baseline", a claim about any of k, is Bonferroni-corrected).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

CONFIDENCE = 0.95
MIN_SEEDS = 3  # fewer seeds: an interval is shown, but no claim is made
MARGIN = 0.02  # equivalence margin of "matches", in accuracy (absolute)
INTERVAL = (f"{CONFIDENCE:.0%} interval across seeds: Student's t over the per-seed values, never narrower than "
            "the evaluation sets' own sampling error, cut to the metric's range")
UNBOUNDED = (-math.inf, math.inf)

# The range of a metric, by name (accuracies and attention masses are fractions, correlations are in [-1, 1]).
_RANGES = {"loss": (0.0, math.inf), "bayes_loss": (0.0, math.inf), "excess_loss_se": (0.0, math.inf),
           "normalized_accuracy": (0.0, math.inf), "steps": (0.0, math.inf), "wall_seconds": (0.0, math.inf)}


def metric_range(name: str) -> tuple[float, float]:
    """The values ``name`` can take: accuracies, ``*_attention`` and ``agree_*`` in [0, 1], ``*_correlation`` in
    [-1, 1]."""
    if name.endswith("accuracy") and name != "normalized_accuracy" or name.endswith("_attention") \
            or name.startswith("agree_"):
        return 0.0, 1.0
    if name.endswith("_correlation"):
        return -1.0, 1.0
    return _RANGES.get(name, UNBOUNDED)


@lru_cache(maxsize=None)
def _t(level: float, df: int) -> float:
    from scipy import stats

    return float(stats.t.ppf(level, df))


@lru_cache(maxsize=None)
def _z(level: float) -> float:
    from scipy import stats

    return float(stats.norm.ppf(level))


@dataclass(frozen=True)
class Stat:
    """A mean over seeds with its interval (``low``/``high`` None with one seed)."""

    mean: float
    low: float | None
    high: float | None
    n: int

    @property
    def interval(self) -> tuple[float, float] | None:
        return None if self.low is None or self.high is None else (self.low, self.high)

    @property
    def width(self) -> float | None:
        """``high - low``: what ``tokbench run --target-ci`` compares with twice its target."""
        return None if self.low is None or self.high is None else self.high - self.low


def binomial_var(mean: float, examples: int, seeds: int = 1) -> float:
    """Variance of one seed's accuracy on ``examples`` sequences, with the Agresti-Coull estimate of p.

    p is estimated from all ``seeds * examples`` sequences plus two successes and two
    failures, so a perfect score does not claim a zero sampling error.
    """
    total = seeds * examples
    p = (mean * total + 2) / (total + 4)
    return p * (1 - p) / examples


def mean(values: Sequence[float]) -> float:
    """The mean, correctly rounded (``math.fsum``), so it does not depend on the order of the seeds."""
    first = values[0]
    return first if all(v == first for v in values) else math.fsum(values) / len(values)


def variance(values: Sequence[float]) -> float:
    """The sample variance (n - 1 in the denominator); exactly 0 when all values are equal."""
    centre = mean(values)
    return math.fsum((v - centre) ** 2 for v in values) / (len(values) - 1)


def _half_width(values: Sequence[float], eval_var: float, level: float) -> float:
    """Half-width of the two-sided ``level`` interval of the mean of ``values`` (n >= 2)."""
    n = len(values)
    upper = (1 + level) / 2
    seeds = _t(upper, n - 1) * math.sqrt(variance(values) / n)
    evaluation = _z(upper) * math.sqrt(eval_var / n)
    return max(seeds, evaluation)


def seeds_needed(values: Sequence[float], eval_var: float, half_width: float, cap: int) -> int:
    """The fewest seeds (more than ``len(values)``, at most ``cap``) whose interval is predicted to be at most
    ``half_width`` wide on each side, taking the spread of ``values`` as the truth.

    The prediction uses the same half-width as :func:`summarise` at each candidate n, with
    the t quantile of n - 1 degrees of freedom: with three seeds t is 4.30 and falls to
    2.31 at nine, so scaling the current width by sqrt(n / n') alone would ask for about
    twice the seeds a cell needs. A cell with fewer than two values asks for one more.
    """
    n = len(values)
    if n < 2:
        return min(n + 1, cap)
    spread = variance(values)
    upper = (1 + CONFIDENCE) / 2
    for more in range(n + 1, cap + 1):
        if max(_t(upper, more - 1) * math.sqrt(spread / more), _z(upper) * math.sqrt(eval_var / more)) <= half_width:
            return more
    return cap


def summarise(values: Sequence[float], eval_var: float | None = 0.0, bounds: tuple[float, float] = UNBOUNDED,
              confidence: float = CONFIDENCE) -> Stat:
    """The mean of ``values`` (one per seed) and its interval, both inside ``bounds``.

    ``eval_var`` is the variance of one value from its evaluation set alone (0 where the
    metric has no known evaluation error, e.g. a diagnostic; None where it has one that
    cannot be computed, an accuracy on an evaluation set of unknown size: then no
    interval). The mean is cut to ``bounds`` too (:func:`inside`).
    """
    n = len(values)
    if n == 0:
        raise ValueError("no values to summarise")
    centre = inside(mean(values), bounds)
    if n < 2 or eval_var is None:
        return Stat(centre, None, None, n)
    half = _half_width(values, eval_var, confidence)
    return Stat(centre, max(bounds[0], centre - half), min(bounds[1], centre + half), n)


def inside(value: float, bounds: tuple[float, float]) -> float:
    """``value`` cut to ``bounds``: the estimate of a quantity that cannot leave them (a score's expectation is at
    most 1: a model that beats the oracle on one finite test set did so by luck, e.g. on the ties of a vote)."""
    return min(max(value, bounds[0]), bounds[1])


def seed_mean(values: Sequence[float | None]) -> float:
    """The mean over seeds of one point (e.g. a curve's step); missing values are left out; NaN if none."""
    present = [v for v in values if v is not None]
    return math.fsum(present) / len(present) if present else math.nan


# ---- tests behind the claims ---------------------------------------------------------------------------------

MATCHES, BELOW, ABOVE, UNDECIDED = "matches", "below", "above", "undecided"


@dataclass(frozen=True)
class Comparison:
    """A cell against a reference on the same seeds: the mean difference, its 95% interval and the verdict.

    ``verdict`` is None under ``MIN_SEEDS`` seeds (no claim), else ``matches`` (equivalent
    within +-``MARGIN`` by TOST at 5%), ``below`` / ``above`` (the 95% interval of the
    difference excludes 0) or ``undecided``.
    """

    difference: float
    low: float | None
    high: float | None
    n: int
    verdict: str | None


def compare(values: Sequence[float], reference: Sequence[float], eval_var: float | None = 0.0,
            margin: float = MARGIN) -> Comparison:
    """Test per-seed ``values`` against per-seed ``reference`` values (paired by seed).

    ``eval_var`` is the evaluation-set variance of one difference (the sum of the
    variances of its two terms; 0 for an analytic reference such as the Bayes optimum;
    None where it cannot be computed: no interval and no claim).
    """
    if len(values) != len(reference) or not values:
        raise ValueError("compare needs one reference value per seed")
    differences = [v - r for v, r in zip(values, reference)]
    n = len(differences)
    centre = mean(differences)
    if n < 2 or eval_var is None:
        return Comparison(centre, None, None, n, None)
    half = _half_width(differences, eval_var, CONFIDENCE)
    verdict = None
    if n >= MIN_SEEDS:
        equivalence = _half_width(differences, eval_var, 1 - 2 * (1 - CONFIDENCE))  # TOST: 90% interval
        verdict = _verdict(centre, half, equivalence, margin)
    return Comparison(centre, centre - half, centre + half, n, verdict)


def _verdict(difference: float, half: float, equivalence: float, margin: float) -> str:
    """``matches`` when the TOST interval (half-width ``equivalence``) lies inside +-``margin``; else ``below`` or
    ``above`` when the 95% interval (half-width ``half``) excludes 0; else ``undecided``."""
    if -margin < difference - equivalence and difference + equivalence < margin:
        return MATCHES
    if difference + half < 0:
        return BELOW
    if difference - half > 0:
        return ABOVE
    return UNDECIDED


def differs(a: Sequence[float], a_var: float | None, b: Sequence[float], b_var: float | None) -> bool | None:
    """Whether two cells' means differ: the 95% Welch interval of ``mean(a) - mean(b)`` excludes 0.

    ``a_var``/``b_var`` are the evaluation-set variances of one value of each. None (no
    claim) when either cell has fewer than ``MIN_SEEDS`` seeds or an unknown evaluation variance.
    """
    if min(len(a), len(b)) < MIN_SEEDS or a_var is None or b_var is None:
        return None
    va, vb = variance(a) / len(a), variance(b) / len(b)
    upper = (1 + CONFIDENCE) / 2
    if va + vb > 0:
        df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))  # Welch-Satterthwaite
        from scipy import stats

        seeds = float(stats.t.ppf(upper, df)) * math.sqrt(va + vb)
    else:
        seeds = 0.0
    evaluation = _z(upper) * math.sqrt(a_var / len(a) + b_var / len(b))
    return abs(mean(a) - mean(b)) > max(seeds, evaluation)


# ---- scores: weighted sums of independent cell means ----------------------------------------------------------

@dataclass(frozen=True)
class Part:
    """One cell's share of a score: its weight, its per-seed values and one value's evaluation-set variance."""

    weight: float
    values: Sequence[float]
    eval_var: float | None = 0.0  # None: unknown (the score gets no variance, so no interval and no claim)


@dataclass(frozen=True)
class Estimate:
    """A weighted sum of cell means: its value, the variance of the estimate and its Welch-Satterthwaite terms.

    ``terms`` holds per cell ``(u_c, n_c - 1)`` with ``u_c = w_c**2 * v_c / n_c``; ``var``
    is None when a cell has one seed (no variance, so no interval). ``seeds`` is the
    fewest seeds of any cell: under ``MIN_SEEDS`` no claim is made.
    """

    value: float
    var: float | None
    terms: tuple[tuple[float, int], ...]
    seeds: int

    @property
    def df(self) -> float | None:
        return _satterthwaite(self.terms)

    def stat(self, bounds: tuple[float, float] = UNBOUNDED, confidence: float = CONFIDENCE) -> Stat:
        """The value with its ``confidence`` interval (t on the Welch-Satterthwaite df), both inside ``bounds``."""
        value = inside(self.value, bounds)
        if self.var is None:
            return Stat(value, None, None, self.seeds)
        half = _welch_half_width(self.var, self.terms, confidence)
        return Stat(value, max(bounds[0], value - half), min(bounds[1], value + half), self.seeds)


def _satterthwaite(terms: Sequence[tuple[float, int]]) -> float | None:
    """Welch-Satterthwaite degrees of freedom of a sum of independent variance terms; None if all are 0."""
    total = math.fsum(u for u, _ in terms)
    if total <= 0:
        return None
    return total**2 / math.fsum(u * u / df for u, df in terms if u > 0)


def _welch_half_width(var: float, terms: Sequence[tuple[float, int]], confidence: float) -> float:
    df = _satterthwaite(terms)
    if df is None:
        return 0.0  # no sampling variance at all (every seed equal, evaluation error unknown)
    from scipy import stats

    return float(stats.t.ppf((1 + confidence) / 2, df)) * math.sqrt(var)


def weighted_sum(parts: Sequence[Part]) -> Estimate:
    """``sum(w_c * mean_c)`` over independent cells, with the variance and df described in the module docstring."""
    if not parts or any(not p.values for p in parts):
        raise ValueError("a score needs at least one value in every cell")
    value = math.fsum(p.weight * mean(p.values) for p in parts)
    seeds = min(len(p.values) for p in parts)
    if seeds < 2 or any(p.eval_var is None for p in parts):
        return Estimate(value, None, (), seeds)
    terms = tuple((p.weight**2 * max(variance(p.values), p.eval_var) / len(p.values), len(p.values) - 1)
                  for p in parts)
    return Estimate(value, math.fsum(u for u, _ in terms), terms, seeds)


def compare_scores(a: Estimate, b: Estimate, margin: float = MARGIN,
                   equivalence_alpha: float = 1 - CONFIDENCE) -> Comparison:
    """Test ``a - b`` for two estimates on disjoint cells (Welch, Welch-Satterthwaite df).

    ``verdict`` as :func:`compare`'s: None when either has a cell under ``MIN_SEEDS``
    seeds, else ``matches`` (the ``1 - 2 * equivalence_alpha`` interval, 90% by default, inside
    +-``margin``: two one-sided tests at ``equivalence_alpha``), ``above``/``below`` (95%
    interval excludes 0) or ``undecided``. A caller that claims a match with *any* of k references
    passes ``equivalence_alpha / k`` (Bonferroni), so the claim keeps its level.
    """
    difference = a.value - b.value
    seeds = min(a.seeds, b.seeds)
    if a.var is None or b.var is None:
        return Comparison(difference, None, None, seeds, None)
    var, terms = a.var + b.var, a.terms + b.terms
    half = _welch_half_width(var, terms, CONFIDENCE)
    verdict = None
    if seeds >= MIN_SEEDS:
        verdict = _verdict(difference, half, _welch_half_width(var, terms, 1 - 2 * equivalence_alpha), margin)
    return Comparison(difference, difference - half, difference + half, seeds, verdict)


# ---- the coverage simulation quoted in the protocol --------------------------------------------------------------

@dataclass(frozen=True)
class Coverage:
    """How often the nominal interval covered the true mean in ``trials`` synthetic cells."""

    seeds: int
    seed_sd: float
    rate: float
    trials: int


def coverage(seeds: int, centre: float, seed_sd: float, examples: int, trials: int, rng_seed: int = 0) -> Coverage:
    """Simulate cells: per seed a true accuracy ~ N(centre, seed_sd) cut to [0, 1], scored on ``examples`` sequences.

    Returns the fraction of cells whose interval (:func:`summarise`, with the binomial
    evaluation variance) contains the cells' true mean accuracy.
    """
    import numpy as np

    rng = np.random.default_rng(rng_seed)
    accuracies = np.clip(rng.normal(centre, seed_sd, (trials, seeds)), 0.0, 1.0)
    scores = rng.binomial(examples, accuracies) / examples
    truth = _clipped_mean(centre, seed_sd)
    covered = 0
    for row in scores.tolist():
        stat = summarise(row, binomial_var(mean(row), examples, seeds), (0.0, 1.0))
        covered += stat.low <= truth <= stat.high
    return Coverage(seeds, seed_sd, covered / trials, trials)


def _clipped_mean(centre: float, sd: float) -> float:
    """E[clip(X, 0, 1)] for X ~ N(centre, sd): the true mean accuracy of the simulated cells."""
    if sd == 0:
        return min(1.0, max(0.0, centre))
    def above(limit: float, mu: float) -> float:  # E[(Y - limit)+] for Y ~ N(mu, sd)
        d = (limit - mu) / sd
        pdf, sf = math.exp(-d * d / 2) / math.sqrt(2 * math.pi), math.erfc(d / math.sqrt(2)) / 2
        return sd * pdf - (limit - mu) * sf

    return centre - above(1.0, centre) + above(0.0, -centre)


# Fixed settings of the simulation: 1000 test sequences, as the built-in tasks use, accuracy 0.8.
COVERAGE_EXAMPLES = 1000
COVERAGE_MEAN = 0.8
COVERAGE_SEEDS = (2, 3, 5, 10, 20, 50)
COVERAGE_TRIALS = 4000


def coverage_table(seed_sds: Sequence[float] = (0.03, 0.1, 0.0)) -> list[Coverage]:
    """The simulation quoted in the protocol, one entry per (seed sd, number of seeds)."""
    return [coverage(n, COVERAGE_MEAN, sd, COVERAGE_EXAMPLES, COVERAGE_TRIALS, rng_seed=n)
            for sd in seed_sds for n in COVERAGE_SEEDS]


# ---- the coverage simulation of the score interval ---------------------------------------------------------------

SCORE_SEED_RANGES = ((3, 3), (3, 5), (5, 10), (10, 20), (3, 20))  # seeds per cell, drawn per cell in this range
SCORE_TRIALS = 2000


@dataclass(frozen=True)
class ScoreCoverage:
    """How often the nominal score interval covered the true score on ``trials`` synthetic ladders."""

    seeds: tuple[int, int]
    rate: float
    trials: int


def score_coverage(seeds: tuple[int, int], trials: int = SCORE_TRIALS, examples: int = COVERAGE_EXAMPLES,
                   rng_seed: int = 0) -> ScoreCoverage:
    """Simulate ladders and return how often the score interval contains the true score.

    Each trial draws a ladder of 3-5 rungs; per rung a Bayes optimum in {1, 0.8, 0.6}, a true
    normalised accuracy in [0.3, 0.95], a seed-to-seed sd in [0.01, 0.1] and a number of
    seeds in ``seeds`` (so cells differ in both). Per seed a true accuracy ~ N(optimum x
    normalised, sd) cut to [0, 1] is scored on ``examples`` sequences and divided by the
    optimum; the true score is the mean over rungs of the cells' true normalised means.
    """
    import numpy as np

    rng = np.random.default_rng(rng_seed)
    covered = 0
    for _ in range(trials):
        rungs = int(rng.integers(3, 6))
        parts, truth = [], 0.0
        for _ in range(rungs):
            optimum = float(rng.choice([1.0, 0.8, 0.6]))
            centre = float(rng.uniform(0.3, 0.95)) * optimum
            sd = float(rng.uniform(0.01, 0.1))
            n = int(rng.integers(seeds[0], seeds[1] + 1))
            accuracy = rng.binomial(examples, np.clip(rng.normal(centre, sd, n), 0.0, 1.0)) / examples
            floor = binomial_var(float(accuracy.mean()), examples, n) / optimum**2
            parts.append(Part(1 / rungs, (accuracy / optimum).tolist(), floor))
            truth += _clipped_mean(centre, sd) / optimum / rungs
        stat = weighted_sum(parts).stat(metric_range("normalized_accuracy"))
        covered += stat.low <= truth <= stat.high
    return ScoreCoverage(seeds, covered / trials, trials)


def score_coverage_table() -> list[ScoreCoverage]:
    """The simulation quoted in the score method, one entry per range of seeds per cell."""
    return [score_coverage(r, rng_seed=i) for i, r in enumerate(SCORE_SEED_RANGES)]
