"""What hostile Markdown may cost the page (PROJ-3): an answer is rendered block by block, a
streaming answer re-renders only its last block, and past the size bounds an answer (or one
block) is shown as plain text with a Render button — so a 200 KB table, or ``*a`` a hundred
thousand times, leaves the page answering clicks while it streams and when the chat opens."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect
from tests.support.model_server import FakeModelServer
from tests.ui.harness import Server, make_conversation, make_profile, open_chat

pytestmark = pytest.mark.browser

PAYLOADS = [
    line
    for line in (Path(__file__).with_name("xss_payloads.txt")).read_text().splitlines()
    if line.strip() and not line.startswith("#")
]

# A button outside the feed that notes how long each click waited for the page's main thread.
PROBE = """() => {
  const probe = document.createElement("button");
  probe.id = "probe";
  probe.textContent = "probe";
  window.__waits = [];
  // A click is two events: the press may wait for a long task and the release then none.
  for (const name of ["mousedown", "click"])
    probe.addEventListener(name, (event) => window.__waits.push(performance.now() - event.timeStamp));
  Object.assign(probe.style, { position: "fixed", top: "0", left: "0", zIndex: "1000" });
  document.body.append(probe);
}"""


def table(size: int) -> str:
    """A Markdown table of about ``size`` characters with tiny cells: the most elements a
    character of Markdown can ask for."""
    rows = ["| n | a | b | c |", "|---|---|---|---|"]
    length = sum(len(r) + 1 for r in rows)
    while length < size:
        rows.append(f"| {len(rows)} | x | y | z |")
        length += len(rows[-1]) + 1
    return "\n".join(rows)


@pytest.fixture(scope="module")
def profile(server: Server, model: FakeModelServer) -> dict[str, Any]:
    with server.api("alice") as api:
        return make_profile(api, model.base_url, "Markdown cost model")


def send(page: Any, text: str) -> None:
    draft = page.get_by_role("textbox", name="Message")
    draft.fill(text)
    draft.press("Enter")


def ask(page: Any, model: FakeModelServer, answer: str, question: str = "Question") -> Any:
    """Send a question; the fake model answers with ``answer``; wait for the stored feed."""
    model.reply(answer, chunks=[answer])
    with page.expect_response(
        lambda r: r.request.method == "GET" and r.url.endswith("/messages"), timeout=20_000
    ):
        send(page, question)
    return page.locator(".message.role-assistant").last


def test_a_streaming_200_kb_table_leaves_the_page_answering_clicks(
    alice: Any, model: FakeModelServer, profile: Any
) -> None:
    text = "Here is the table:\n\n" + table(200_000) + "\n\nThat was all."
    step = 4_000
    model.reply(text, chunks=[text[i : i + step] for i in range(0, len(text), step)], delay=0.03)
    alice.evaluate(PROBE)
    box = alice.locator("#probe").bounding_box()
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    send(alice, "A big table please")
    live = alice.locator(".message.streaming .md")
    expect(live).to_contain_text("Here is the table:")
    while alice.locator(".message.streaming").count():
        alice.mouse.click(x, y)
    waits = alice.evaluate("window.__waits")
    assert max(waits) < 200, f"a click waited {max(waits):.0f} ms for the page: {waits}"
    assert len(waits) >= 6, f"only {len(waits) // 2} clicks while the answer streamed"
    # The table is far past the bounds: plain text, with a button to render it anyway.
    answer = alice.locator(".message.role-assistant").last
    expect(answer).to_contain_text("That was all.")
    expect(answer.locator(".md p").first).to_have_text("Here is the table:")
    plain = answer.locator(".md .md-plain")
    expect(plain).to_have_count(1)
    expect(plain).to_contain_text("| 1000 | x | y | z |")
    expect(plain.get_by_role("button", name="Render")).to_be_visible()
    expect(answer.locator(".md table")).to_have_count(0)
    expect(answer.locator(".md p").last).to_have_text("That was all.")


def stored_chat(server: Server, profile: Any, *answers: str) -> dict[str, Any]:
    with server.api("alice") as api:
        c = make_conversation(api, profile["id"], title="Costly answers")
        for i, answer in enumerate(answers):
            for role, text in (("user", f"Question {i}"), ("assistant", answer)):
                r = api.post(
                    f"/api/v1/conversations/{c['id']}/messages",
                    json={"role": role, "content": text},
                )
                assert r.status_code == 201, r.text
    return c


def test_past_the_bounds_a_stored_answer_is_plain_text_until_render(
    alice: Any, server: Server, profile: Any
) -> None:
    hostile = "Sneaky <img src=x onerror=window.__pwned=1> [link](javascript:window.__pwned=1)"
    many = "Intro.\n\n" + "**b** " * 2_000 + "\n\n" + hostile  # 2,000 elements in one block
    c = stored_chat(server, profile, "*a" * 100_000, table(200_000), many)
    open_chat(alice, server, c)
    answers = alice.locator(".message.role-assistant")
    expect(answers).to_have_count(3)
    star, big_table, strong = (answers.nth(i) for i in range(3))
    expect(star.locator(".md-plain")).to_contain_text("*a*a*a")
    expect(star.locator(".md em")).to_have_count(0)
    expect(big_table.locator(".md-plain")).to_contain_text("| 5000 | x | y | z |")
    expect(big_table.locator(".md table")).to_have_count(0)
    # Only the costly block is plain; the blocks around it are Markdown.
    expect(strong.locator(".md > p").first).to_have_text("Intro.")
    expect(strong.locator(".md-plain")).to_have_count(1)
    expect(strong.locator(".md strong")).to_have_count(0)
    expect(strong.locator(".md > p").last).to_contain_text("Sneaky <img src=x")
    # Render: all of it as Markdown, sanitised as ever.
    strong.get_by_role("button", name="Render").click()
    expect(strong.locator(".md strong")).to_have_count(2_000)
    expect(strong.locator(".md-plain")).to_have_count(0)
    expect(strong.get_by_role("button", name="Render")).to_have_count(0)
    assert strong.locator(".md img, .md script").count() == 0
    assert strong.locator(".md a[href^='javascript']").count() == 0
    assert alice.evaluate("window.__pwned") is None


def test_a_table_plain_while_it_grows_is_a_table_once_finished(
    alice: Any, model: FakeModelServer, profile: Any
) -> None:
    rows = table(3_000)  # ≈150 rows, ≈750 elements: more than the growing block may cost
    text = "Before.\n\n" + rows + "\n\nAfter."
    model.reply(text, chunks=[text[i : i + 300] for i in range(0, len(text), 300)], delay=0.01)
    with alice.expect_response(
        lambda r: r.request.method == "GET" and r.url.endswith("/messages"), timeout=20_000
    ):
        send(alice, "A table")
    answer = alice.locator(".message.role-assistant").last
    expect(answer.locator(".md table tr")).to_have_count(rows.count("\n"))
    expect(answer.locator(".md-plain")).to_have_count(0)
    expect(answer.locator(".md > p")).to_have_text(["Before.", "After."])


SPLIT_SAMPLES = [
    "# Title\n\nA paragraph\nwith two lines.\n\n- a\n- b\n\n  more of b\n\n- c\n\nAfter the list.",
    "1. one\n\n   still one\n\n2. two\n\n```py\nx = 1\n\n\ny = 2\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |",
    "~~~~\na\n\n~~~\nb\n~~~~\nz\n\n    indented code\n\n    more code\n\nend",
    "\n\nleading blank lines\n\n\n\n> quote\n\n> another\n\n---\n\nSetext\n===\n\n``` open fence\n\nnot closed",
]


def test_blocks_render_as_the_whole_text_would(alice: Any) -> None:
    """Rendering block by block gives the HTML of rendering the whole text, and a splitter fed
    a growing text gives at every length the blocks of splitting that text at once."""
    samples = SPLIT_SAMPLES + [line.replace("\\n", "\n") for line in PAYLOADS]
    problems = alice.evaluate(
        """(samples) => {
      const md = window.markdownit({ html: false, linkify: true, breaks: true });
      const { split, splitter } = window.chatmem.blocks;
      const problems = [];
      for (const text of samples) {
        const blocks = split(text);
        if (blocks.join("") !== text) problems.push(["join", text]);
        if (blocks.map((b) => md.render(b)).join("") !== md.render(text)) problems.push(["html", text]);
        const growing = splitter();
        for (let n = 1; n <= text.length; n += 1) {
          const got = growing(text.slice(0, n));
          if (JSON.stringify(got) !== JSON.stringify(split(text.slice(0, n)))) {
            problems.push(["growing", text.slice(0, n)]);
            break;
          }
        }
      }
      return problems;
    }""",
        samples,
    )
    assert problems == []
    assert len(alice.evaluate("t => window.chatmem.blocks.split(t)", SPLIT_SAMPLES[0])) == 4
