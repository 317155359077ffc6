"""The published index.html in a real headless browser: scrolling, sticky headers, no wrapping, sorting, and the
headline in view at 800 and 1400 px (also on a synthetic page rendered by the current code).

Needs Debian's ``chromium`` and ``chromium-driver`` and the ``selenium`` package (the test
extra). In CI (``CI=true``, where ``.ci/run`` installs them) they are required; elsewhere the
tests skip with the reason.
"""
from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "leaderboard" / "index.html"
WIDTH, HEIGHT = 1400, 900
# Chromium as root in a container: no sandbox, no GPU, nothing that reaches the network.
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", f"--window-size={WIDTH},{HEIGHT}")


def _missing() -> str | None:
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "the selenium package is not installed (pip install -e '.[test]')"
    for program in ("chromium", "chromedriver"):
        if shutil.which(program) is None:
            return f"{program} is not on PATH (apt-get install chromium chromium-driver)"
    return None


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    reason = _missing()
    if reason:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the browser tests are required in CI: {reason}")
        pytest.skip(reason)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for flag in (*FLAGS, f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=shutil.which("chromedriver")), options=options)
    try:
        driver.set_window_size(WIDTH, HEIGHT)
        driver.get(PAGE.as_uri())
        yield driver
    finally:
        driver.quit()


def test_no_page_level_horizontal_scroll_at_1400px(browser):
    width = browser.execute_script("return window.innerWidth")
    assert width <= WIDTH
    assert browser.execute_script("return document.documentElement.scrollWidth") <= width
    # The wide tables scroll inside their own box instead.
    inner = browser.execute_script(
        "return Array.from(document.querySelectorAll('.scroll')).filter(b => b.scrollWidth > b.clientWidth).length")
    assert inner >= 1


def test_sticky_header_and_first_column_and_no_wrapped_cell(browser):
    styles = browser.execute_script("""
        const cells = Array.from(document.querySelectorAll('table.sortable td, table.sortable th'));
        const heads = Array.from(document.querySelectorAll('table.sortable thead th'));
        const firsts = Array.from(document.querySelectorAll('table.sortable tr > :first-child'));
        return {wrap: cells.filter(c => getComputedStyle(c).whiteSpace !== 'nowrap').length,
                head: heads.filter(c => getComputedStyle(c).position !== 'sticky').length,
                first: firsts.filter(c => getComputedStyle(c).position !== 'sticky').length,
                tall: cells.filter(c => c.getClientRects()[0].height > 2.2 * parseFloat(getComputedStyle(c).fontSize)
                                   ).length,
                cells: cells.length};""")
    assert styles["cells"] > 100
    assert styles == {**styles, "wrap": 0, "head": 0, "first": 0, "tall": 0}


def _column(browser, table: object, index: int) -> list[str]:
    return browser.execute_script(
        "return Array.from(arguments[0].tBodies[0].rows).filter(r => !r.classList.contains('pinned'))"
        ".map(r => r.cells[arguments[1]]).map(c => c.dataset.sort ?? c.textContent.trim());", table, index)


def _numbers(values: list[str]) -> list[float]:
    return [float(v) for v in values if v]


def test_sorting_is_descending_first_with_an_arrow_and_blanks_last(browser):
    from selenium.webdriver.common.by import By

    # The accuracy tables (a section with ladders puts its score tables before them; a wide one is cut into
    # several; the details per task follow under their own heading): the first column with blanks.
    tables = browser.find_elements(By.XPATH, "//table[preceding::*[self::h2 or self::h3][1][.='Accuracy']]")
    table, index = next((table, i) for table in tables
                        for i in range(1, len(table.find_elements(By.CSS_SELECTOR, "thead th")))
                        if "" in _column(browser, table, i))
    header = table.find_elements(By.CSS_SELECTOR, "thead th")[index]
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", header)
    header.click()
    values = _column(browser, table, index)
    filled = len(_numbers(values))
    assert header.get_attribute("aria-sort") == "descending"
    assert _numbers(values) == sorted(_numbers(values), reverse=True) and all(values[:filled])
    assert not any(values[filled:])  # blanks last
    arrow = browser.execute_script("return getComputedStyle(arguments[0], '::after').content", header)
    assert "\u25bc" in arrow
    last = table.find_elements(By.CSS_SELECTOR, "tbody tr")[-1]
    assert "pinned" in last.get_attribute("class")  # the Bayes optimum stays the last row

    header.click()
    values = _column(browser, table, index)
    assert header.get_attribute("aria-sort") == "ascending"
    assert _numbers(values) == sorted(_numbers(values)) and not any(values[len(_numbers(values)):])
    assert "\u25b2" in browser.execute_script("return getComputedStyle(arguments[0], '::after').content", header)


def test_one_accuracy_table_per_experiment(browser):
    titles = browser.execute_script(
        "return Array.from(document.querySelectorAll('h2, h3')).map(h => h.textContent)")
    published = _published_sections()
    sections = [t for t in titles if t in published]
    assert sections == published  # in the order the published README's command names them
    assert titles.count("Accuracy") == len(sections)
    ranking = next((t for t in titles if t in ("Scores", "Architectures")), None)
    if ranking is not None:  # a scored section (the benchmark's) leads
        assert titles.index(ranking) < min(titles.index(name) for name in published if name != "tokbench")


def _layout(browser, width: int) -> dict:
    """At ``width`` px: the page's own scroll width, and where the first ``Overall`` header sits (no scrolling)."""
    browser.set_window_size(width, HEIGHT)
    browser.execute_script("window.scrollTo(0, 0)")
    return browser.execute_script("""
        const th = Array.from(document.querySelectorAll('thead th')).find(t => t.textContent.trim() === 'Overall');
        const r = th.getBoundingClientRect();
        return {inner: window.innerWidth, page: document.documentElement.scrollWidth,
                left: r.left, right: r.right, boxScrolled: th.closest('.scroll').scrollLeft};""")


def _score_boxes(browser) -> dict:
    """The score tables (those with an Overall or a family score column) that scroll sideways inside their box,
    and where the first one starts and whether the training budget is stated above it."""
    return browser.execute_script("""
        const rankings = Array.from(document.querySelectorAll('h3, h2')).filter(h =>
            ['Scores', 'Architectures', 'Single attention layers', 'Architectures by family',
             'Single attention layers by family'].includes(h.textContent));
        const leads = rankings.filter(h => !h.textContent.endsWith(' by family')).map(h => {
            let e = h.nextElementSibling; while (e && !e.classList.contains('scroll')) e = e.nextElementSibling;
            return e ? e.getBoundingClientRect().top : null;});
        const boxes = [];  // every table box under a ranking's heading, up to the next heading
        for (const h of rankings)
            for (let e = h.nextElementSibling; e && !/^H[1-6]$/.test(e.tagName); e = e.nextElementSibling)
                if (e.classList.contains('scroll')) boxes.push(e);
        const scored = rankings[0];
        const first = scored ? scored.nextElementSibling : null;
        let box = first; while (box && !box.classList.contains('scroll')) box = box.nextElementSibling;
        const before = Array.from(document.querySelectorAll('p')).filter(p => box &&
            p.getBoundingClientRect().bottom <= box.getBoundingClientRect().top).map(p => p.textContent);
        return {boxes: boxes.length,
                cut: boxes.filter(b => b.scrollWidth > b.clientWidth).map(b => b.querySelector('thead').textContent),
                top: box ? box.getBoundingClientRect().top : null, inner: window.innerHeight, leads: leads,
                budget: before.some(t => t.includes('Training budget'))};""")


def _assert_fits(browser) -> None:
    """No page scroll at 800 px, every score column in view without scrolling a box, the first ranking with its
    budget line on the first screen at 800 and 1400 px, and at 1400 px every ranking's Overall table too (side by
    side)."""
    try:
        narrow = _layout(browser, 800)
        assert narrow["page"] <= narrow["inner"], narrow  # no horizontal page scroll at 800 px
        boxes = _score_boxes(browser)
        assert boxes["boxes"] and boxes["cut"] == [] and boxes["budget"] and boxes["top"] < 0.8 * boxes["inner"], boxes
        wide = _layout(browser, 1400)
        assert wide["boxScrolled"] == 0 and 0 <= wide["left"] and wide["right"] <= wide["inner"], wide
        boxes = _score_boxes(browser)
        assert boxes["cut"] == [] and boxes["top"] < 0.8 * boxes["inner"], boxes
        assert all(top < boxes["inner"] for top in boxes["leads"]), boxes  # every ranking's Overall on the first screen
    finally:
        browser.set_window_size(WIDTH, HEIGHT)


def _published_sections() -> list[str]:
    """The section names of the published folder, as its README's regenerate command lists them."""
    import shlex

    (line,) = [line for line in (PAGE.parent / "README.md").read_text(encoding="utf-8").splitlines()
               if line.startswith("tokbench leaderboard ")]
    words = shlex.split(line)
    return [value.partition("=")[0] for flag, value in zip(words, words[1:]) if flag == "--records"]


def test_published_page_fits_800px_and_shows_overall_at_1400px(browser):
    """No sideways page scroll at 800 px; where the published page has a score table (a scored section such as
    tokbench's), its Overall header is in view at 1400 px. The synthetic page below always has one."""
    browser.get(PAGE.as_uri())
    if browser.execute_script("return Array.from(document.querySelectorAll('thead th'))"
                              ".some(t => t.textContent.trim() === 'Overall')"):
        _assert_fits(browser)
    else:
        try:
            browser.set_window_size(800, HEIGHT)
            page, inner = browser.execute_script(
                "return [document.documentElement.scrollWidth, window.innerWidth]")
            assert page <= inner, (page, inner)
        finally:
            browser.set_window_size(WIDTH, HEIGHT)


def _synthetic_suite() -> list[dict]:
    from leaderboard_synth import ladder

    families = ["causal-graph", "icl-markov", "lag-walk", "mqar", "random-walk", "scc-automaton", "selective-copy",
                "sparse-selection", "majority"]
    recs = []
    for index, task in enumerate(families):
        recs += (ladder(task, "transformer-with-a-long-name", [0.95, 0.9, 0.8])
                 + ladder(task, "attn-onehot-concat-zeroinit", [0.9, 0.7, 0.5])
                 + ladder(task, "mlp", [0.6, 0.5, 0.4]) + ladder(task, "bayes-optimal", [1.0, 1.0, 1.0])
                 + ladder(task, "uniform", [0.1, 0.1, 0.1], family="baseline"))
    for n, rec in enumerate(recs):  # one commit per record: a long list of unbreakable hashes
        rec["provenance"]["git_commit"] = f"{n:040x}"
    return recs


def test_synthetic_wide_page_fits_800px_and_shows_overall_at_1400px(browser, tmp_path):
    """Nine families, long names, hundreds of commits: the current code's page still fits."""
    from leaderboard_synth import sections
    from tokbench.leaderboard.publish import render

    page = tmp_path / "index.html"
    page.write_text(render(sections(_synthetic_suite(), "tokbench"), "html"), encoding="utf-8")
    try:
        browser.get(page.as_uri())
        _assert_fits(browser)
    finally:
        browser.get(PAGE.as_uri())


def test_score_table_is_sticky_unwrapped_and_sorts_overall_with_blanks_last(browser, tmp_path):
    """A section with ladders (synthetic records): its score table follows the same rules as every table, and
    sorting keeps the oracle and the baselines apart, after the ranked rows."""
    from selenium.webdriver.common.by import By

    from leaderboard_synth import ladder, sections
    from tokbench.leaderboard.publish import render

    recs = (ladder("mqar", "transformer", [0.95, 0.9, 0.8]) + ladder("mqar", "attn-paper-a", [0.9, 0.7, 0.5])
            + ladder("mqar", "mlp", [0.6, 0.5, 0.4]) + ladder("random-walk", "transformer", [0.9, 0.8, 0.7])
            + ladder("random-walk", "attn-paper-a", [0.9, 0.9, 0.9])
            + ladder("mqar", "bayes-optimal", [1.0, 1.0, 1.0]) + ladder("random-walk", "bayes-optimal", [1.0] * 3)
            + ladder("mqar", "uniform", [0.1] * 3, family="baseline")
            + ladder("random-walk", "uniform", [0.1] * 3, family="baseline"))
    page = tmp_path / "index.html"
    page.write_text(render(sections(recs, "tokbench"), "html"), encoding="utf-8")
    try:
        browser.get(page.as_uri())
        table = browser.find_element(By.XPATH, "//h3[.='Scores']/following::table[1]")
        styles = browser.execute_script("""
            const cells = Array.from(arguments[0].querySelectorAll('td, th'));
            return {wrap: cells.filter(c => getComputedStyle(c).whiteSpace !== 'nowrap').length,
                    head: Array.from(arguments[0].querySelectorAll('thead th'))
                        .filter(c => getComputedStyle(c).position !== 'sticky').length};""", table)
        assert styles == {"wrap": 0, "head": 0}
        headers = table.find_elements(By.CSS_SELECTOR, "thead th")
        index = [h.text for h in headers].index("Overall")
        headers[index].click()
        values = _column(browser, table, index)
        assert len(_numbers(values)) == 2 and _numbers(values) == sorted(_numbers(values), reverse=True)
        assert values[2:] == [""]  # mlp has no random-walk score, so no Overall: last
        for _ in range(2):  # descending, then ascending: the oracle (Overall 1) is never ranked among the models
            last = [r.text.split()[0] for r in table.find_elements(By.CSS_SELECTOR, "tbody tr")]
            assert last[-2:] == ["uniform", "bayes-optimal"] and "bayes-optimal" not in last[:-2]
            headers[index].click()
    finally:
        browser.get(PAGE.as_uri())
