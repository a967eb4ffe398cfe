"""The leaderboard in a real headless browser (Debian's chromium, driven by Selenium).

Opens the page from file://, reads the rendered tables, clicks headers and checks the
order (numeric, ascending then descending, empty values last, within each group), and
that the browser logged no error (a blocked resource or a script error would be one).
Skipped, with the reason, only where chromium or its driver is not installed
(`apt-get install chromium chromium-driver`; scripts/setup.sh --dev does it as root).
"""

from __future__ import annotations

import shutil
from datetime import UTC, datetime

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

from leaderboard_results import EVIL, write_results
from novabench.report.failures import Limits
from novabench.report.leaderboard import write_leaderboard

CHROMIUM = next(filter(None, map(shutil.which, ("chromium", "chromium-browser"))), None)
CHROMEDRIVER = shutil.which("chromedriver")

pytestmark = pytest.mark.skipif(
    CHROMIUM is None or CHROMEDRIVER is None,
    reason="needs a headless browser: `apt-get install chromium chromium-driver` "
    "(or `bash scripts/setup.sh --dev` as root)",
)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    root = tmp_path_factory.mktemp("leaderboard")
    out = root / "leaderboard.html"
    # Limits the fixture's models (90% answered) meet, so that no row carries a mark.
    limits = Limits(min_answered=0.85, max_error_rate=0.15)
    write_leaderboard(**write_results(root), out=out, generated=datetime.now(UTC), limits=limits)
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # An explicit driver path: Selenium Manager would otherwise try to download one.
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        driver.get(out.as_uri())
        yield driver
    finally:
        driver.quit()


def column(driver, table: str, index: int, group: str = "model") -> list[str]:
    rows = driver.find_elements(
        By.CSS_SELECTOR, f"#table-{table} tbody[data-group={group}] tr.entry"
    )
    # The CI is on a line of its own under the value: read the cell as one line.
    cells = [row.find_elements(By.CSS_SELECTOR, "th, td")[index].text for row in rows]
    return [" ".join(cell.split()) for cell in cells]


def click(driver, table: str, label: str) -> str:
    """Click the header named ``label``; return its aria-sort afterwards."""
    for header in driver.find_elements(By.CSS_SELECTOR, f"#table-{table} thead th"):
        if header.text.startswith(label):
            header.find_element(By.TAG_NAME, "button").click()
            return header.get_attribute("aria-sort")
    raise AssertionError(f"no header {label!r} in {table}")


def errors(driver) -> list[str]:
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def test_tables_render_with_their_rows_and_values(browser):
    assert browser.title == "NOVA leaderboard"
    tables = browser.find_elements(By.CSS_SELECTOR, "table.board")
    assert [t.get_attribute("id") for t in tables] == ["table-localization", "table-captioning"]
    assert column(browser, "localization", 0) == ["model-b", EVIL, "model-a", "model-nan"]
    assert column(browser, "localization", 1) == [
        "10.3 [8.0, 12.5]",
        "100.0 [99.0, 100.0] p = 0.010",
        "9.5 [5.0, 14.0] p = 0.010",
        "–1",
    ]
    assert column(browser, "localization", 0, "control") == ["gold", "random"]
    assert column(browser, "localization", 0, "human") == ["rater-r1"]
    assert column(browser, "captioning", 4) == ["31.3 [28.0, 34.5]"]
    # The escaped name is shown as text; it did not become an element.
    assert not browser.find_elements(By.CSS_SELECTOR, "main script")
    assert errors(browser) == []


def test_clicking_a_header_sorts_numerically_within_each_group(browser):
    assert click(browser, "localization", "mAP@30") == "ascending"
    # 9.5 < 10.3 < 100.0 (as text "10.3" < "100.0" < "9.5"); no value last
    assert column(browser, "localization", 0) == ["model-a", "model-b", EVIL, "model-nan"]
    assert column(browser, "localization", 0, "control") == ["random", "gold"]
    assert click(browser, "localization", "mAP@30") == "descending"
    assert column(browser, "localization", 0) == [EVIL, "model-b", "model-a", "model-nan"]
    assert column(browser, "localization", 0, "control") == ["gold", "random"]
    # Sorting another column resets the first one's state.
    assert click(browser, "localization", "Model") == "ascending"
    assert column(browser, "localization", 0) == [EVIL, "model-a", "model-b", "model-nan"]
    headers = browser.find_elements(By.CSS_SELECTOR, "#table-localization thead th")
    assert [h.get_attribute("aria-sort") for h in headers].count("none") == len(headers) - 1
    assert click(browser, "localization", "FP30") == "ascending"
    assert column(browser, "localization", 6) == ["0", "3", "7", "12"]
    assert errors(browser) == []


def test_console_errors_would_be_seen(browser):
    # The check above would pass vacuously if the log were not collected.
    browser.execute_script("console.error('probe from the test')")
    assert any("probe from the test" in message for message in errors(browser))


def test_the_page_fits_a_1400_px_window_with_its_captions(browser):
    browser.set_window_size(1400, 900)
    try:
        widths = browser.execute_script(
            "return Array.from(document.querySelectorAll('.scroll'))"
            ".map(e => [e.scrollWidth, e.clientWidth])"
        )
        assert widths and all(scroll <= client for scroll, client in widths), widths
        right = browser.execute_script(
            "return Math.max(...Array.from(document.querySelectorAll('caption'))"
            ".map(c => c.getBoundingClientRect().right))"
        )
        assert right <= browser.execute_script("return window.innerWidth"), right
    finally:
        browser.set_window_size(1200, 900)


def test_every_dash_shows_its_reason_on_hover_and_links_its_footnote(browser):
    cells = browser.find_elements(By.CSS_SELECTOR, "table.board td")
    dashes = [cell for cell in cells if cell.text.startswith("–")]
    assert dashes
    for cell in dashes:
        reason = cell.get_attribute("title")  # what the browser shows on hover
        link = cell.find_element(By.CSS_SELECTOR, "sup a")
        note = browser.find_element(By.ID, link.get_attribute("href").split("#")[1])
        assert reason and note.is_displayed() and note.text.endswith(f": {reason}.")
    bert = next(c for c in browser.find_elements(By.CSS_SELECTOR, "#table-captioning td")
                if "BERT F1 not computed" in (c.get_attribute("title") or ""))  # fmt: skip
    # The reason's HTML is text, not markup.
    assert bert.get_attribute("title").endswith("the encoder <roberta> & co is not cached offline")
    bert.find_element(By.CSS_SELECTOR, "sup a").click()
    assert browser.execute_script("return location.hash") == "#note-captioning-2"
    assert errors(browser) == []


def test_p_values_are_shown_beside_the_values(browser):
    shown = browser.find_elements(By.CSS_SELECTOR, "#table-localization td .p")
    assert [p.text for p in shown if p.is_displayed()] == ["p = 0.010"] * 5
    assert not browser.find_elements(By.CSS_SELECTOR, "#table-captioning td .p")


def test_figure_thumbnails_render_from_the_page_itself(browser):
    images = browser.find_elements(By.CSS_SELECTOR, "ul.figures img")
    assert len(images) == 1
    # Decoded and laid out (a blocked or broken image has no natural width).
    natural = browser.execute_script(
        "return [arguments[0].complete, arguments[0].naturalWidth, arguments[0].width]",
        images[0],
    )
    assert natural == [True, 360, 240]
    link = images[0].find_element(By.XPATH, "..")
    assert link.get_attribute("href").endswith("/figures/localization_metrics.png")
    assert errors(browser) == []
