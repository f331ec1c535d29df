"""The design pass: the memory window as a picture.  One stacked bar, a segment per row of the
breakdown (each its tokens / window wide, summing to the window, never past it), the
threshold of auto-compression a line across it, the table its legend (a swatch per row in its
segment's colour); the counter's small bar and the ring drawn with the same segments and
colours; distinguishable (3:1 against the track) and axe-clean in both themes."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect
from tests.support.model_server import FakeModelServer
from tests.ui.harness import (
    THEME_CASES,
    THEME_IDS,
    ConsoleErrors,
    Server,
    axe_violations,
    make_conversation,
    make_profile,
    open_chat,
    opened_page,
)

pytestmark = pytest.mark.browser

DESKTOP = {"width": 1280, "height": 860}
WINDOW = 16384
KEYS = [
    "instructions",
    "tools",
    "summary",
    "messages",
    "files",
    "images",
    "apps",
    "facts",
    "free",
    "reserve",
]
SUMMARY = "Goal: faster reads. Decided: measure first, keep PostgreSQL. Open: which cache."

#: What the page shows, measured in one go: the bar, its segments, the marker, the legend's
#: swatches, the counter's and the ring's segments.
_MEASURE = """() => {
  const box = (n) => n.getBoundingClientRect();
  const bar = document.getElementById('mw-bar');
  const marker = document.getElementById('mw-bar-threshold');
  const segs = (root, colour) => Array.from(root.querySelectorAll('[data-key]')).map((s) => ({
    key: s.dataset.key, tokens: Number(s.dataset.tokens), width: box(s).width,
    colour: getComputedStyle(s)[colour]}));
  const rows = Array.from(document.querySelectorAll('#mw-breakdown tr[data-key]'))
    .filter((r) => !r.hidden)
    .map((r) => { const w = r.querySelector('.seg-swatch');
      return {key: r.dataset.key, swatch: w ? getComputedStyle(w).backgroundColor : null,
              hidden: w ? w.getAttribute('aria-hidden') : null,
              before: w ? w === r.querySelector('th').firstElementChild : false}; });
  return {
    bar: {left: box(bar).left, width: box(bar).width, role: bar.getAttribute('role'),
          label: bar.getAttribute('aria-label'), over: bar.classList.contains('seg-over')},
    marker: marker.hidden ? null : {centre: box(marker).left + box(marker).width / 2,
                                    title: marker.title},
    segments: segs(document.getElementById('mw-segments'), 'backgroundColor'),
    counter: segs(document.getElementById('counter-fill'), 'backgroundColor'),
    ring: segs(document.querySelector('#usage-ring .ring-segs'), 'stroke'),
    track: getComputedStyle(bar).backgroundColor,
    rows,
  };
}"""


@pytest.fixture(scope="module")
def profile(server: Server, model: FakeModelServer) -> dict[str, Any]:
    with server.api("alice") as api:
        return make_profile(api, model.base_url, "Fake model", context_window=WINDOW)


@pytest.fixture(scope="module")
def chat(server: Server, model: FakeModelServer, profile: dict[str, Any]) -> dict[str, Any]:
    """The screenshots' seed: early messages compacted into a summary, then a new pair."""
    with server.api("alice") as api:
        c = make_conversation(api, profile["id"], pairs=4, title="Memory picture")
        model.reply(SUMMARY)
        compacted = api.post(f"/api/v1/conversations/{c['id']}/compact", json={})
        assert compacted.status_code in (200, 201, 202), compacted.text
        for role, text in (("user", "Which cache?"), ("assistant", "Redis, with a short TTL.")):
            r = api.post(
                f"/api/v1/conversations/{c['id']}/messages", json={"role": role, "content": text}
            )
            assert r.status_code == 201, r.text
        return dict(c)


def opened(browser: Any, console: ConsoleErrors, session: Any, scheme: str) -> Any:
    return opened_page(browser, console, session, viewport=DESKTOP, color_scheme=scheme)


def _plan(server: Server, chat: dict[str, Any]) -> dict[str, Any]:
    with server.api("alice") as api:
        plan = api.get(f"/api/v1/conversations/{chat['id']}/context").json()
    assert plan["tokens"]["summary"] > 0, plan["tokens"]  # the seed has its summary
    return dict(plan)


def _open_window(page: Any, server: Server, chat: dict[str, Any], plan: dict[str, Any]) -> Any:
    open_chat(page, server, chat)
    page.locator("#chat-title").click()
    page.keyboard.press("Control+Shift+M")
    dialog = page.locator("#memory-window")
    expect(dialog).to_be_visible()
    summary = f"{plan['tokens']['summary']:,}"
    expect(dialog.locator("#mw-breakdown tr[data-key='summary'] td")).to_have_text(summary)
    expect(dialog.locator("#mw-segments .seg")).to_have_count(len(KEYS))
    return dialog


def _rgb(css: str) -> tuple[int, int, int]:
    r, g, b = (int(float(x)) for x in css[css.index("(") + 1 : css.index(")")].split(",")[:3])
    return r, g, b


def _contrast(a: str, b: str) -> float:
    def lum(css: str) -> float:
        def lin(c: float) -> float:
            c /= 255
            return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

        r, g, b = _rgb(css)
        return 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b)

    hi, lo = sorted((lum(a), lum(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def _check_picture(seen: dict[str, Any], plan: dict[str, Any]) -> None:
    tokens, window = plan["tokens"], plan["tokens"]["window"]
    segments = seen["segments"]
    # A segment per row, in the bar's order, summing to the window.
    assert [s["key"] for s in segments] == KEYS
    assert sum(s["tokens"] for s in segments) == window == WINDOW
    for s in segments:
        if s["key"] != "free":
            assert s["tokens"] == tokens[s["key"]], s
    assert segments[-2]["tokens"] == tokens["free"]  # the plan fits: free is the plan's
    # Their widths fill the bar: each its share, together the bar's width.
    width = seen["bar"]["width"]
    assert width > 100
    assert abs(sum(s["width"] for s in segments) - width) <= 2, (segments, width)
    for s in segments:
        assert abs(s["width"] - s["tokens"] / window * width) <= 1.5, s
        if s["tokens"] == 0:
            assert s["width"] == 0, s
    # The threshold of auto-compression: a line at threshold / window of the bar.
    threshold = plan["compaction"]["threshold"]
    assert threshold, plan["compaction"]
    marker = seen["marker"]
    assert marker is not None
    assert abs(marker["centre"] - seen["bar"]["left"] - threshold / window * width) <= 2, marker
    assert marker["title"].startswith("Auto-compress from ")
    # A picture with words for those who do not see it; the table stays the data.
    assert seen["bar"]["role"] == "img"
    percent = int(tokens["used"] * 100 / window + 0.5)  # JavaScript's Math.round
    label = seen["bar"]["label"]
    assert re.match(rf"^[\d.]+K? of 16K tokens \({percent}%\)\. ", label), label
    assert "Auto-compress from " in seen["bar"]["label"]
    assert not seen["bar"]["over"]
    # The table is the legend: a hidden swatch before each row's label, in its colour.
    colours = {s["key"]: s["colour"] for s in segments}
    assert len(set(colours.values())) == len(KEYS), colours  # a colour per kind
    assert colours["free"] == seen["track"]  # free is the empty track
    rows = seen["rows"]
    assert {r["key"] for r in rows} >= {"instructions", "summary", "messages", "free", "reserve"}
    for row in rows:
        assert row["swatch"] == colours[row["key"]], row
        assert row["hidden"] == "true" and row["before"], row
    # Every kind can be told from the track (non-text contrast, 3:1).
    for key, colour in colours.items():
        if key != "free":
            assert _contrast(colour, seen["track"]) >= 3, (key, colour, seen["track"])
    # The counter's small bar: the same segments in the same colours.
    assert [(s["key"], s["tokens"], s["colour"]) for s in seen["counter"]] == [
        (s["key"], s["tokens"], s["colour"]) for s in segments
    ]
    # The ring (no usage limits: it shows the context's use): an arc per part sent that has
    # tokens; free and the reserve are its track.
    drawn = [s for s in segments if s["key"] not in ("free", "reserve") and s["tokens"] > 0]
    assert [(s["key"], s["tokens"]) for s in seen["ring"]] == [
        (s["key"], s["tokens"]) for s in drawn
    ]
    for arc in seen["ring"]:
        assert arc["colour"] == colours[arc["key"]], arc


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_bar_is_the_plan_in_segments_with_the_table_as_its_legend(
    browser: Any,
    console: ConsoleErrors,
    server: Server,
    alice_session: Any,
    chat: Any,
    scheme: str,
) -> None:
    plan = _plan(server, chat)
    with opened(browser, console, alice_session, scheme) as page:
        _open_window(page, server, chat, plan)
        _check_picture(page.evaluate(_MEASURE), plan)
        ring = page.locator("#usage-ring .ring-fill")
        share = int(plan["tokens"]["used"] * 100 / plan["tokens"]["window"] + 0.5)
        expect(ring).to_have_attribute("stroke-dasharray", f"{share} 100")


def test_the_segments_of_the_two_themes_differ_and_follow_the_theme(
    browser: Any, console: ConsoleErrors, server: Server, alice_session: Any, chat: Any
) -> None:
    plan = _plan(server, chat)
    seen = {}
    for scheme in ("light", "dark"):
        with opened(browser, console, alice_session, scheme) as page:
            _open_window(page, server, chat, plan)
            seen[scheme] = {s["key"]: s["colour"] for s in page.evaluate(_MEASURE)["segments"]}
    for key in KEYS:
        assert seen["light"][key] != seen["dark"][key], key


def test_a_plan_past_the_window_is_clipped_at_the_window_and_says_so(
    alice: Any, server: Server, chat: Any
) -> None:
    plan = _plan(server, chat)
    _open_window(alice, server, chat, plan)
    alice.keyboard.press("Escape")
    with alice.expect_response(lambda r: "/context" in r.url and r.request.method == "POST"):
        alice.get_by_role("textbox", name="Message").fill("word " * 20_000)  # ≈ 32K tokens
    alice.locator("#counter").click()
    bar = alice.locator("#mw-bar")
    expect(bar).to_have_class("seg-bar seg-over")
    seen = alice.evaluate(_MEASURE)
    segments = seen["segments"]
    assert sum(s["tokens"] for s in segments) == WINDOW
    assert segments[-2]["tokens"] == 0  # nothing free
    assert segments[-1]["tokens"] == 0  # the reserve is clipped first: it no longer fits
    assert segments[3]["key"] == "messages" and segments[3]["tokens"] > 0  # the draft, clipped
    assert abs(sum(s["width"] for s in segments) - seen["bar"]["width"]) <= 2
    assert seen["bar"]["label"].endswith(" past the window"), seen["bar"]["label"]
    assert seen["counter"][-2]["tokens"] == 0
    expect(alice.locator("#counter-bar")).to_have_class("counter-bar seg-over")
    # The draft gone, the plan fits again: no overflow, free is back.
    alice.keyboard.press("Escape")
    alice.get_by_role("textbox", name="Message").fill("")
    expect(alice.locator("#counter-bar")).to_have_class("counter-bar")
    alice.locator("#counter").click()
    expect(bar).to_have_class("seg-bar")
    expect(bar.locator(".seg-free")).not_to_have_attribute("data-tokens", "0")


@pytest.mark.parametrize(("scheme", "theme"), THEME_CASES, ids=THEME_IDS)
def test_axe_finds_no_violation_with_the_window_open_in_either_theme(
    browser: Any,
    console: ConsoleErrors,
    server: Server,
    alice_session: Any,
    chat: Any,
    scheme: str,
    theme: str,
) -> None:
    plan = _plan(server, chat)
    with server.api("alice") as api:
        assert api.patch("/api/v1/me", json={"theme": theme}).status_code == 200
    try:
        with opened(browser, console, alice_session, scheme) as page:
            _open_window(page, server, chat, plan)
            assert axe_violations(page, None) == []
    finally:
        with server.api("alice") as api:
            assert api.patch("/api/v1/me", json={"theme": "system"}).status_code == 200
