"""Scores of a suite's ladders: their statistics, the score table, its claims, the ladder plot and every format."""
from __future__ import annotations

import csv
import io
import json
import math

import pytest
from rich.console import Console
from scipy import stats as scipy_stats

from leaderboard_synth import WALK, ladder, seeds, sections, v3
from tokbench.leaderboard import notes, stats
from tokbench.leaderboard.aggregate import build
from tokbench.leaderboard.document import Heading, Image, Table, document
from tokbench.leaderboard.report import build_report, build_reports
from tokbench.leaderboard.plots import ladder_lines, ladders, plan
from tokbench.leaderboard.publish import render
from tokbench.leaderboard.render import to_terminal
from tokbench.leaderboard.scores import OVERALL, build_scores, ceiling, rung_cell
from tokbench.leaderboard.stats import Part, binomial_var, compare_scores, weighted_sum
from tokbench.leaderboard.views import Measure, measure_text, score_table

PITFALL = "The plain average of the inputs is uninformative: a layer from zero init stays at 1/K."


def _suite(n: int | list[int] = 3) -> list[dict]:
    """Two families, one pitfall; a transformer with two members, an attention layer, an MLP n/a on mqar, an oracle."""
    return (ladder("mqar", "transformer", [0.95, 0.9, 0.8], n=n, family="transformer")
            + ladder("mqar", "transformer-2l", [0.97, 0.95, 0.85], n=n, family="transformer")
            + ladder("mqar", "attn-paper-a", [0.9, 0.7, 0.5], n=n, family="attention (1 layer)")
            + ladder("mqar", "bayes-optimal", [1.0, 1.0, 1.0], n=n)
            + ladder("random-walk", "transformer", [0.72, 0.68, 0.64], n=n, bayes=0.8, family="transformer")
            + ladder("random-walk", "attn-paper-a", [0.8, 0.8, 0.8], n=n, bayes=0.8, family="attention (1 layer)")
            + ladder("random-walk", "mlp", [0.6, 0.5, 0.4], n=n, bayes=0.8)
            + ladder("random-walk", "bayes-optimal", [0.8, 0.8, 0.8], n=n, bayes=0.8)
            + ladder("deterministic-walk", "attn-paper-a", [0.17, 0.17, 0.17], n=n, pitfall=PITFALL,
                     family="attention (1 layer)")
            + ladder("deterministic-walk", "transformer", [0.97, 0.99, 1.0], n=n, pitfall=PITFALL,
                     family="transformer")
            + _not_applicable("mqar", "mlp"))


def _floored(recs: list[dict]) -> list[dict]:
    """``recs`` with a chance accuracy of 0 on every run: the scores are the same numbers on the chance scale, whose
    floor (a score of 0) bold is tested against where no baseline was run."""
    return v3(recs, chance=0.0)


def _not_applicable(task: str, model: str) -> list[dict]:
    recs = ladder(task, model, [0.5, 0.5, 0.5])
    for rec in recs:
        rec.update(status="not_applicable", error="the model predicts only the last position", metrics={}, train={},
                   curve={}, attention_profile=None)
    return recs


def _texts(table: Table) -> dict[str, dict[str, str]]:
    """The table as {row label: {header: text}} (ranked and pinned rows), bold marked with a trailing *."""
    out = {}
    for row in table.rows + table.pinned:
        out[row[0]] = {h: (v if isinstance(v, str) else measure_text(v) + ("*" if v.best else ""))
                       for h, v in zip(table.headers[1:], row[1:])}
    return out


# ---- the statistics ----------------------------------------------------------------------------------------------

def test_one_cell_score_is_the_t_interval_of_its_mean():
    values = [0.49, 0.5, 0.47, 0.52]
    stat = weighted_sum([Part(1.0, values, binomial_var(0.495, 1000, 4))]).stat()
    low, high = scipy_stats.t.interval(0.95, 3, loc=sum(values) / 4, scale=scipy_stats.sem(values))
    assert (stat.low, stat.high) == (pytest.approx(low, abs=1e-12), pytest.approx(high, abs=1e-12))


def test_weighted_sum_uses_floored_variances_and_welch_satterthwaite_df():
    a, b = [0.9, 0.8, 0.85], [0.5] * 6  # the second cell's seeds agree: its evaluation set's variance is the floor
    floor = binomial_var(0.5, 1000, 6)
    estimate = weighted_sum([Part(0.5, a, 0.0), Part(0.5, b, floor)])
    ua, ub = 0.25 * stats.variance(a) / 3, 0.25 * floor / 6
    assert estimate.value == pytest.approx(0.5 * 0.85 + 0.5 * 0.5)
    assert estimate.var == pytest.approx(ua + ub)
    assert estimate.df == pytest.approx((ua + ub) ** 2 / (ua**2 / 2 + ub**2 / 5))
    half = scipy_stats.t.ppf(0.975, estimate.df) * math.sqrt(ua + ub)
    assert estimate.stat().width == pytest.approx(2 * half)
    assert weighted_sum([Part(1.0, [0.99, 1.0, 1.0], 0.0)]).stat((0.0, 1.0)).high == 1.0  # cut to the range


@pytest.mark.parametrize("entry", stats.score_coverage_table(), ids=lambda e: f"{e.seeds[0]}-{e.seeds[1]} seeds")
def test_nominal_95_score_interval_covers_93_to_97_percent(entry):
    """Ladders of 3-5 rungs with unequal seeds (3 to 20 per cell) and unequal spreads and optima."""
    assert entry.trials >= 2000 and 0.93 <= entry.rate <= 0.97, entry


def test_one_seed_in_a_cell_gives_no_interval_and_no_claim():
    one = weighted_sum([Part(0.5, [0.9], 0.0), Part(0.5, [0.8, 0.82, 0.81], 0.0)])
    assert one.var is None and one.stat().interval is None and one.seeds == 1
    other = weighted_sum([Part(1.0, [0.1, 0.12, 0.11], 0.0)])
    assert compare_scores(one, other).verdict is None and compare_scores(one, other).low is None


def test_compare_scores_rules():
    high = weighted_sum([Part(1.0, [0.9, 0.91, 0.92], binomial_var(0.91, 1000, 3))])
    low = weighted_sum([Part(1.0, [0.5, 0.52, 0.51], binomial_var(0.51, 1000, 3))])
    assert compare_scores(high, low).verdict == stats.ABOVE and compare_scores(low, high).verdict == stats.BELOW
    close = weighted_sum([Part(1.0, [0.5, 0.49, 0.52], binomial_var(0.5, 1000, 3))])
    assert compare_scores(low, close).verdict == stats.UNDECIDED  # 3 seeds on 1000 sequences: not equivalent
    tight = [Part(1.0, [0.5 + 0.001 * (i % 3) for i in range(20)], binomial_var(0.5, 100000, 20))]
    assert compare_scores(weighted_sum(tight), weighted_sum(tight)).verdict == stats.MATCHES
    two = weighted_sum([Part(1.0, [0.9, 0.95], 0.0)])
    assert compare_scores(two, low).verdict is None  # 2 seeds: an interval, but no claim


# ---- the score table ---------------------------------------------------------------------------------------------

def test_family_score_is_the_mean_of_rung_means_with_unequal_seeds():
    recs = ladder("mqar", "transformer", [0.9, 0.6, 0.3], n=[3, 10, 4], spread=0.0)
    scores = build_scores(build(recs))
    (row,) = scores.rows
    assert scores.score("mqar", row).stat.mean == pytest.approx(0.6)  # pooling the seeds would give 0.565
    assert scores.score("mqar", row).stat.n == 3


def test_score_table_columns_overall_pitfalls_and_order():
    board = build(_suite())
    scores = build_scores(board)
    table = score_table(scores)
    assert table.headers == ["model", "Overall", "mqar", "random-walk", "deterministic-walk (pitfall)"]
    texts = _texts(table)
    assert list(texts) == ["transformer", "attn-paper-a", "mlp", "transformer-2l", "bayes-optimal (oracle)"]
    assert [r[0] for r in table.pinned] == ["bayes-optimal (oracle)"]  # kept apart from the ranked rows
    assert texts["mlp"]["mqar"] == "n/a" and texts["mlp"]["Overall"] == "n/a"  # n/a on a counted family
    assert texts["transformer-2l"]["random-walk"] == "" and texts["transformer-2l"]["Overall"] == ""
    assert scores.family[{r.label: r for r in scores.rows}["mlp"].key] == "mlp"  # no model_family: the name
    # Overall: the mean of the family scores, never the pitfall's.
    row = {r.label: r for r in scores.rows}["transformer"]
    mqar, walk = (scores.score(c, row).stat.mean for c in ("mqar", "random-walk"))
    assert scores.score(OVERALL, row).stat.mean == pytest.approx((mqar + walk) / 2)
    assert walk == pytest.approx(0.85)  # normalised by the optimum 0.8
    # Cut to what perfect accuracy would score: 1 where the optimum is 1, 1 / 0.8 on the walk.
    perfect = {r.label: r for r in scores.rows}["bayes-optimal"]
    assert scores.score("mqar", perfect).stat.high == 1.0  # 0.997 +- 0.013 before the cut
    walk_ladder = next(lad for lad in scores.ladders if lad.task == "random-walk")
    assert ceiling(rung_cell(board, walk_ladder.rungs[0], row)) == pytest.approx(1 / 0.8)
    assert "Overall: none for mlp (n/a on mqar)" in table.notes
    assert "Overall: none for transformer-2l (no score on random-walk)" in table.notes
    assert f"deterministic-walk (pitfall): rungs 4 / 8 | 8 / 16 | 16 / 32 (K / context_length); pitfall: {PITFALL}" \
        in table.notes


def test_bold_is_the_best_learned_score_never_an_oracle():
    texts = _texts(score_table(build_scores(build(_floored(_suite())))))
    assert texts["transformer"]["Overall"].endswith("*") and not texts["attn-paper-a"]["Overall"].endswith("*")
    assert texts["transformer-2l"]["mqar"].endswith("*")
    assert not any(v.endswith("*") for v in texts["bayes-optimal (oracle)"].values())
    assert texts["transformer"]["deterministic-walk (pitfall)"].endswith("*")


def test_bold_extends_to_scores_shown_equivalent_and_not_to_overlaps():
    base = ladder("mqar", "a", [0.9, 0.8, 0.7], n=20, spread=0.001, examples=100000)
    twin = ladder("mqar", "b", [0.901, 0.8, 0.7], n=20, spread=0.001, examples=100000)
    noisy = ladder("mqar", "c", [0.89, 0.8, 0.7], n=3, spread=0.05)
    scores = build_scores(build(_floored(base + twin + noisy)))
    texts = _texts(score_table(scores))
    assert texts["b"]["mqar"].endswith("*") and texts["a"]["mqar"].endswith("*")  # equivalent within 0.02
    top, wide = (scores.score("mqar", r).stat for r in scores.rows if r.model in ("b", "c"))
    assert wide.low < top.mean < wide.high  # the intervals overlap ...
    assert not texts["c"]["mqar"].endswith("*")  # ... but nothing shows c equivalent, so it is not bold


# ---- claims ------------------------------------------------------------------------------------------------------

def test_claims_distinguishable_and_not():
    lines = notes.score_claims(build_scores(build(_suite())))
    overall = next(line for line in lines if line.startswith("Overall:"))
    assert overall.startswith("Overall: transformer scores highest at ")
    assert "then attn-paper-a at " in overall and "transformer scores higher than attn-paper-a (95% Welch" in overall
    assert overall.endswith("excludes 0).")
    assert not any("bayes-optimal" in line for line in lines)
    close = (ladder("mqar", "a", [0.9, 0.8, 0.7], spread=0.05) + ladder("mqar", "b", [0.89, 0.81, 0.69], spread=0.05))
    lines = notes.score_claims(build_scores(build(close)))
    assert [line.split(":")[0] for line in lines] == ["Overall", "mqar"]  # one family: Overall is its score
    assert all(" is not distinguishable from " in line and line.endswith("contains 0).") for line in lines)


def test_no_claim_under_three_seeds_in_any_cell_behind_either_score():
    recs = (ladder("mqar", "a", [0.9, 0.9, 0.9], n=[3, 2, 3]) + ladder("mqar", "b", [0.2, 0.2, 0.2]))
    lines = notes.score_claims(build_scores(build(recs)))
    assert len(lines) == 2 and all(line.endswith("; no claim (a cell behind either score has fewer than 3 seeds).")
                                   and "higher" not in line for line in lines)
    one = ladder("mqar", "a", [0.9, 0.9, 0.9], n=[3, 1, 3], spread=0.0) + ladder("mqar", "b", [0.2, 0.2, 0.2])
    scores = build_scores(build(one))
    row = next(r for r in scores.rows if r.model == "a")
    assert measure_text(Measure(scores.score("mqar", row).stat)) == "0.900 (n=1)"
    assert notes.score_claims(scores)[0].endswith("no claim (a cell behind either score has fewer than 3 seeds).")


# ---- placement and formats ---------------------------------------------------------------------------------------

def test_sections_without_ladders_have_no_scores():
    board_sections = sections(seeds(3, [0.5, 0.5, 0.5]))
    assert build_scores(board_sections[0].board) is None
    assert not any(isinstance(b, Heading) and b.text == "Scores" for b in document(build_reports(board_sections)))
    assert "score" not in render(board_sections, "csv").splitlines()[0]
    assert "scores" not in json.loads(render(board_sections, "json"))["sections"][0]
    assert not any(p.image.leads for p in plan(build_report(board_sections[0])))


def test_scores_lead_their_section_in_every_format():
    board_sections = sections(_floored(_suite()) + seeds(3, [0.5, 0.5, 0.5]), "tokbench")
    images = {"tokbench": [p.image for p in plan(build_report(board_sections[0]), "tokbench-")]}
    md = render(board_sections, "md", images)
    headings = [line for line in md.splitlines() if line.startswith("### ")]
    # each ranking's Overall first (the first screen shows both rankings), then each one's families
    assert [h for h in headings if h != "### Accuracy"][:4] == [
        "### Architectures", "### Single attention layers", "### Architectures by family",
        "### Single attention layers by family"] and headings.index("### Accuracy") > 3
    scores_part = md.split("### Architectures", 1)[1].split("### Accuracy", 1)[0]
    lead = scores_part.split("### Architectures by family", 1)[0]
    assert "| model | Overall |" in lead and "mqar" not in lead.split("### Single attention layers", 1)[0]
    # as many tables as a narrow page needs, the model column repeated
    assert "| model | mqar | random-walk |" in scores_part
    assert "| model | deterministic-walk (pitfall) |" in scores_part
    assert "![Ladders: " in scores_part and "(plots/tokbench-ladders.png)" in scores_part
    assert "docs/scores.md" in scores_part and "Welch" in scores_part
    assert "tokbench-ladders.png" not in md.split("### Plots", 1)[1]

    console = Console(file=io.StringIO(), width=300, color_system=None)
    to_terminal(document(build_reports(board_sections)), console)
    text = console.file.getvalue()
    assert text.index("Single attention layers") < text.index("Architectures by family") < text.index("Accuracy")

    html = render(board_sections, "html", images)
    assert html.index("<h3>Architectures</h3>") < html.index("<h3>Accuracy</h3>")
    beside = html.split('<div class="beside">', 1)[1].split("<h3>Architectures by family</h3>", 1)[0]
    assert "<h3>Architectures</h3>" in beside and "<h3>Single attention layers</h3>" in beside  # side by side
    assert "deterministic-walk (pitfall)</th>" in html

    data = json.loads(render(board_sections, "json"))["sections"][0]["scores"]
    # two rankings, each with its own Overall, bold and claims: no section-wide table
    assert not {"rows", "columns", "counted", "claims"} & set(data)
    assert [(lad["task"], lad["pitfall"]) for lad in data["ladders"]] == [
        ("mqar", ""), ("random-walk", ""), ("deterministic-walk", PITFALL)]
    architectures = data["rankings"][0]
    assert architectures["columns"] == ["Overall", "mqar", "random-walk", "deterministic-walk"]
    first = architectures["rows"][0]
    assert first["label"] == "transformer" and first["scores"]["Overall"]["best"] is True
    assert any(claim.startswith("mqar: transformer-2l scores highest") for claim in architectures["claims"])

    rows = list(csv.DictReader(io.StringIO(render(board_sections, "csv"))))
    score_rows = [r for r in rows if r["kind"] == "score"]
    overall = next(r for r in score_rows if r["task_label"] == "Overall" and r["model_label"] == "transformer"
                   and r["score_at"] == "final")
    assert overall["ranking"] == "Architectures"
    assert float(overall["score_low"]) < float(overall["score_mean"]) < float(overall["score_high"])
    assert {r["ranking"] for r in score_rows if r["model_label"] == "attn-paper-a"} == {"Single attention layers"}
    assert {r["ladder_rung"] for r in rows if r["kind"] == "cell" and r["task"] == "mqar"} == {"0", "1", "2"}
    assert next(r for r in rows if r["kind"] == "cell" and r["task"] == "random-walk" and r["task_params"]
                == json.dumps({**WALK}, sort_keys=True, separators=(",", ":")))["ladder_rung"] == ""

    latex = render(board_sections, "latex")
    assert latex.index("tokbench: Architectures") < latex.index("tokbench: Accuracy")


# ---- the ladder plot ---------------------------------------------------------------------------------------------

def test_ladder_lines_one_per_family_its_best_member():
    board = build(_suite())
    scores = build_scores(board)
    mqar = next(lad for lad in scores.ladders if lad.task == "mqar")
    lines = dict(ladder_lines(board, scores, mqar))
    assert set(lines) == {"transformer", "attention (1 layer)"}  # no oracle, no n/a model
    label, rung_stats = lines["transformer"]
    assert label == "transformer: transformer-2l" and [round(s.mean, 3) for s in rung_stats] == [0.97, 0.95, 0.85]


def test_ladder_plot_panels_share_a_scale_and_mark_pitfalls():
    board = build(_suite())
    scores = build_scores(board)
    fig = ladders(board, scores)
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in axes] == ["mqar", "random-walk", "deterministic-walk (pitfall)"]
    assert len({ax.get_ylim() for ax in axes}) == 1
    assert [t.get_text() for t in axes[0].get_xticklabels()] == ["4 / 8", "8 / 16", "16 / 32"]
    assert axes[0].get_xlabel() == "K / context_length"
    (legend,) = fig.legends  # one shared legend: <= 10 families and the optimum
    assert len(legend.get_texts()) <= 11
    (leading,) = [p for p in plan(build_report(sections(_suite())[0])) if p.image.leads]
    assert isinstance(leading.image, Image) and leading.image.path == "plots/ladders.png"
    assert leading.svg and leading.image.svg == "plots/ladders.svg"  # the HTML page shows the key plot as SVG


def test_two_rankings_are_two_views_of_one_report():
    """The single attention layers (declared family) get their own ranking, the architectures theirs; both keep
    the reference rows and the section's family scores, count their families by the rule over their own learned
    models, and mark the best of their own rows."""
    from tokbench.leaderboard.report import ARCHITECTURES, SINGLE_LAYERS

    report = build_report(sections(_floored(_suite()), "tokbench")[0])
    architectures, single = report.rankings
    assert (architectures.title, single.title) == (ARCHITECTURES, SINGLE_LAYERS)
    # transformer has an Overall; mlp (n/a on mqar) and transformer-2l (no random-walk) follow in the board's order
    assert [r.model for r in architectures.scores.ranked] == ["transformer", "mlp", "transformer-2l"]
    assert [r.model for r in single.scores.ranked] == ["attn-paper-a"]
    assert [r.model for r in single.scores.pinned] == [r.model for r in architectures.scores.pinned] \
        == ["bayes-optimal"]
    # attn-paper-a ties the optimum on random-walk, but one learned model has nothing to tell apart: it counts
    assert single.scores.counted == architectures.scores.counted == ["mqar", "random-walk"]
    assert report.scores.counted == [] and OVERALL not in report.scores.columns  # no section-wide Overall
    assert not report.scores.dropped and report.claims == []
    for ranking in report.rankings:  # the same family scores as the section's, row by row
        for row in ranking.scores.rows:
            for column in report.scores.columns:
                assert ranking.scores.score(column, row).stat == report.scores.score(column, row).stat
    paper_a = single.scores.ranked[0]
    assert single.scores.score("random-walk", paper_a).best  # the best of its own ranking
    assert single.scores.score(OVERALL, paper_a).stat.mean == pytest.approx(
        (single.scores.score("mqar", paper_a).stat.mean + single.scores.score("random-walk", paper_a).stat.mean) / 2)
    data = json.loads(render(sections(_suite(), "tokbench"), "json"))["sections"][0]["scores"]["rankings"]
    assert [(r["title"], [row["model"] for row in r["rows"]]) for r in data] == [
        (ARCHITECTURES, [r.model for r in architectures.scores.rows]),
        (SINGLE_LAYERS, ["attn-paper-a", "bayes-optimal"])]


def test_one_group_is_one_ranking_titled_scores():
    recs = [rec for rec in _suite() if rec["model"] != "attn-paper-a"]
    report = build_report(sections(recs, "tokbench")[0])
    (ranking,) = report.rankings
    assert ranking.title == "Scores" and ranking.scores is report.scores


def test_a_wide_score_table_is_cut_into_tables_a_narrow_page_shows_whole():
    from tokbench.leaderboard.views import BOLD, PAGE_CHARS, fit, measure_text, score_table

    recs = [rec for family in ("causal-graph", "icl-markov", "lag-walk", "mqar", "selective-copy", "sparse-selection")
            for rec in ladder(family, "transformer-with-a-long-name", [0.9, 0.8, 0.7])
            + ladder(family, "bayes-optimal", [1.0, 1.0, 1.0])]
    table = score_table(build_report(sections(recs, "tokbench")[0]).scores, caption="budget")
    parts = fit(table)
    assert len(parts) > 1 and [p.headers[0] for p in parts] == ["model"] * len(parts)
    assert [h for p in parts for h in p.headers[1:]] == table.headers[1:]  # every column once, in order
    assert parts[0].caption == "budget" and not parts[-1].caption and parts[-1].notes == table.notes
    for part in parts:
        text = lambda v: measure_text(v) if not isinstance(v, str) else v  # noqa: E731
        widths = [max(math.ceil(BOLD * len(h)), *(len(text(row[i])) for row in part.all_rows())) + 2
                  for i, h in enumerate(part.headers)]
        assert sum(widths) <= PAGE_CHARS, part.headers


def test_a_section_without_ladders_says_why_its_tasks_rank_nothing():
    """From the numbers: the last-token baseline at the Bayes optimum, or a task scored on its training split."""
    big = {**WALK, "test_size": 100_000}  # enough test sequences for the equivalence test to decide
    solved = seeds(3, [0.8, 0.8, 0.8], model="last-token", bayes=0.8, task_params=big)  # counting next tokens wins
    learned = seeds(3, [0.6, 0.62, 0.61], bayes=0.8, task_params=big)
    open_task = seeds(3, [0.3, 0.31, 0.3], task="deterministic-walk", model="last-token", bayes=1.0)
    training = seeds(3, [0.9, 0.9, 0.9], task="scc-implicit-bias", eval_split="train")
    report = build_report(sections(solved + learned + open_task + training)[0])
    assert report.rankings == [] and len(report.unranked) == 2
    walk, bias = sorted(report.unranked)
    assert walk.startswith("random-walk: the last-token baseline matches the Bayes optimum 0.800")
    assert bias.startswith("scc-implicit-bias (train split): scored on its training split")
    md = render(sections(solved + learned + open_task + training), "md")
    assert "Why these tasks rank nothing" in md and "deterministic-walk: the last-token" not in md


# ---- the review's findings: bold needs a floor; claims that agree with bold; ties as ties; the oracle's 1 ----------

def test_score_bold_without_a_baseline_needs_the_chance_scale_and_a_score_shown_above_0():
    near = ladder("mqar", "a", [0.51, 0.51, 0.51], spread=0.005) + ladder("mqar", "b", [0.5, 0.5, 0.5], spread=0.005)
    scores = build_scores(build(near))  # the older scale, no baseline: no floor, nothing bold, a note says so
    assert not any(s.best for s in scores.cells.values()) and scores.unfloored == [OVERALL, "mqar"]
    assert ("No floor, so nothing bold, in Overall, mqar: no baseline has a score there and the records carry no "
            "chance accuracy.") in score_table(scores).notes
    at_chance = build_scores(build(v3(near, chance=0.5)))  # scores of 0.02 and 0: neither shown above 0
    assert not any(s.best for s in at_chance.cells.values()) and at_chance.unfloored == []
    above = build_scores(build(v3(ladder("mqar", "a", [0.9, 0.9, 0.9]) + ladder("mqar", "b", [0.5, 0.5, 0.5]),
                                  chance=0.5)))
    assert [r.model for r in above.rows if above.score("mqar", r).best] == ["a"]


def test_a_claim_shown_higher_and_within_the_margin_says_both():
    a = ladder("mqar", "a", [0.996, 0.996, 0.996], n=20, spread=0.001, examples=100000)
    b = ladder("mqar", "b", [0.993, 0.993, 0.993], n=20, spread=0.001, examples=100000)
    scores = build_scores(build(_floored(a + b)))
    assert all(scores.score("mqar", r).best for r in scores.ranked)  # equivalent: both bold
    line = next(line for line in notes.score_claims(scores) if line.startswith("mqar"))
    assert "a is higher than b by 0.003 to 0.003" in line
    assert "within the ±0.02 margin (equivalent by TOST at 5%)" in line
    assert "scores higher than" not in line


def test_the_leader_is_named_by_the_shown_means_and_a_tie_is_a_tie():
    a = ladder("mqar", "a", [1.0, 1.0, 1.0], spread=0.0)
    b = ladder("mqar", "b", [1.0, 1.0, 1.0], spread=0.0)
    line = next(line for line in notes.score_claims(build_scores(build(a + b))) if line.startswith("mqar"))
    assert line.startswith("mqar (not in Overall): a at 1.000 (") and " and b at 1.000 (" in line
    assert "tie for the highest mean shown" in line and "scores highest" not in line


def test_the_oracle_row_scores_exactly_1_with_no_floor():
    oracle = v3(ladder("mqar", "bayes-optimal", [0.9, 0.9, 0.9], spread=0.0), chance=0.25, oracle=0.9)
    learned = v3(ladder("mqar", "a", [0.9, 0.9, 0.9], spread=0.0), chance=0.25, oracle=0.9)
    scores = build_scores(build(oracle + learned))
    top = next(r for r in scores.rows if r.oracle)
    assert scores.score("mqar", top).stat.interval == (1.0, 1.0)  # exactly 1 by construction: no interval to show
    row = next(r for r in scores.rows if not r.oracle)  # a learned model at the oracle's accuracy keeps its floor
    assert scores.score("mqar", row).stat.low < 1.0
