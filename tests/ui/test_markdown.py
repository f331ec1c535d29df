"""Answers in Markdown (PROJ-3): what renders, code blocks with their language and Copy, the
raw-text toggle, streaming that leaves finished blocks alone, and a list of known XSS payloads
for Markdown renderers that must neither run nor escape the message's box."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect
from tests.support.model_server import FakeModelServer
from tests.ui.harness import Server, make_conversation, make_profile

pytestmark = pytest.mark.browser

PAYLOADS = [
    line.replace("\\n", "\n")
    for line in (Path(__file__).with_name("xss_payloads.txt")).read_text().splitlines()
    if line.strip() and not line.startswith("#")
]

# What a rendered answer may hold, and what the page may hold outside it.
INSPECT = """() => {
  const TAGS = new Set(["p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "li",
    "blockquote", "pre", "code", "span", "em", "strong", "s", "a", "table", "thead", "tbody",
    "tr", "th", "td", "div", "button"]);
  const ATTRS = new Set(["href", "title", "class", "start", "target", "rel", "type", "aria-label", "tabindex"]);
  const problems = [];
  for (const box of document.querySelectorAll("#messages .md")) {
    const bubble = box.closest(".message").getBoundingClientRect();
    for (const n of box.querySelectorAll("*")) {
      const tag = n.tagName.toLowerCase();
      if (!TAGS.has(tag)) problems.push("element " + tag);
      for (const a of n.attributes) if (!ATTRS.has(a.name)) problems.push(tag + " has " + a.name);
      const href = n.getAttribute("href");
      if (href !== null && !/^(https?:|mailto:)/i.test(href)) problems.push("link to " + href);
      if (tag === "a" && href !== null && (n.rel !== "noopener noreferrer" || n.target !== "_blank"))
        problems.push("link without noopener");
      const position = getComputedStyle(n).position;
      if (position === "fixed" || position === "absolute") problems.push(tag + " is " + position);
    }
    for (const child of box.children) {
      const r = child.getBoundingClientRect();
      if (r.left < bubble.left - 1 || r.right > bubble.right + 1) problems.push(child.tagName + " overflows");
    }
  }
  const counts = {};
  for (const tag of ["script", "iframe", "frame", "form", "style", "base", "meta", "link", "object",
                     "embed", "img", "svg", "input", "video", "details", "math"])
    counts[tag] = document.querySelectorAll(tag).length;
  return { problems, counts, pwned: window.__pwned === undefined ? null : String(window.__pwned),
           hidden: getComputedStyle(document.body).display === "none" };
}"""


@pytest.fixture(scope="module")
def profile(server: Server, model: FakeModelServer) -> dict[str, Any]:
    with server.api("alice") as api:
        return make_profile(api, model.base_url, "Markdown model")


def ask(page: Any, model: FakeModelServer, answer: str, question: str = "Question") -> Any:
    """Send a question; the fake model answers with ``answer``; wait for the stored feed."""
    model.reply(answer)
    draft = page.get_by_role("textbox", name="Message")
    with page.expect_response(
        lambda r: r.request.method == "GET" and r.url.endswith("/messages"), timeout=20_000
    ):
        draft.fill(question)
        draft.press("Enter")
    return page.locator(".message.role-assistant").last


def test_proj3_answers_render_headings_lists_tables_links_quotes_and_code(
    alice: Any, model: FakeModelServer, profile: Any
) -> None:
    answer = ask(
        alice,
        model,
        "## Plan\n\n1. First *step*\n2. Second **step**\n\n- apple\n- pear\n\n"
        "| Name | Count |\n|:-----|------:|\n| a | 1 |\n\n"
        "> Quoted advice\n\nUse `pip install` and see [the docs](https://example.com/docs).",
    )
    md = answer.locator(".md")
    expect(md.get_by_role("heading", name="Plan", level=2)).to_be_visible()
    expect(md.locator("ol > li")).to_have_text(["First step", "Second step"])
    expect(md.locator("ol em")).to_have_text("step")
    expect(md.locator("ul > li")).to_have_text(["apple", "pear"])
    expect(md.get_by_role("table").get_by_role("columnheader")).to_have_text(["Name", "Count"])
    expect(md.get_by_role("cell", name="1")).to_have_class("align-right")
    expect(md.locator("blockquote")).to_have_text("Quoted advice")
    expect(md.locator("p code")).to_have_text("pip install")
    link = md.get_by_role("link", name="the docs")
    expect(link).to_have_attribute("href", "https://example.com/docs")
    expect(link).to_have_attribute("target", "_blank")
    expect(link).to_have_attribute("rel", "noopener noreferrer")
    # The toggle shows the text as it came, and back.
    toggle = answer.get_by_role("button", name="Raw text")
    toggle.click()
    expect(toggle).to_have_attribute("aria-pressed", "true")
    expect(answer.locator(".raw-text")).to_contain_text("1. First *step*")
    expect(answer.locator(".raw-text")).to_contain_text("|:-----|------:|")
    expect(md).to_be_hidden()
    toggle.click()
    expect(md).to_be_visible()
    expect(answer.locator(".raw-text")).to_be_hidden()
    # A question stays plain text with its line breaks.
    question = alice.locator(".message.role-user").last
    expect(question.locator(".md")).to_have_count(0)


def test_proj3_code_block_shows_its_language_and_copy_copies_the_code(
    alice: Any, server: Server, model: FakeModelServer, profile: Any
) -> None:
    alice.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server.url)
    code = 'def greet(name):\n    return f"Hello, {name}!"\n'
    answer = ask(
        alice, model, "Here it is:\n\n```python\n" + code + "```\n\nAnd plain:\n\n```\nls -l\n```"
    )
    blocks = answer.locator(".code-block")
    expect(blocks).to_have_count(2)
    expect(blocks.first.locator(".code-lang")).to_have_text("python")
    expect(blocks.first.locator("code .hljs-keyword").first).to_have_text("def")  # highlighted
    expect(blocks.nth(1).locator(".code-lang")).to_have_text("text")
    blocks.first.get_by_role("button", name="Copy").click()
    expect(blocks.first.get_by_role("button", name="Copied")).to_be_visible()
    assert alice.evaluate("navigator.clipboard.readText()") == code
    blocks.nth(1).get_by_role("button", name="Copy").click()
    expect(blocks.nth(1).get_by_role("button", name="Copied")).to_be_visible()
    assert alice.evaluate("navigator.clipboard.readText()") == "ls -l\n"


def test_proj3_streaming_keeps_finished_blocks_as_the_same_nodes(
    alice: Any, model: FakeModelServer, profile: Any
) -> None:
    words = " ".join(f"w{i}" for i in range(120))
    model.reply("# Title\n\nFirst paragraph stays put.\n\n" + words + "\n\nEND", delay=0.03)
    draft = alice.get_by_role("textbox", name="Message")
    draft.fill("Stream something")
    draft.press("Enter")
    live = alice.locator(".message.streaming .md")
    expect(live).to_contain_text("w2")
    # The heading and the first paragraph are finished: tag the very nodes.
    live.evaluate("box => { box.children[0].__kept = 1; box.children[1].__kept = 1; }")
    expect(live).to_contain_text("w80")
    kept = live.evaluate("box => [box.children[0].__kept, box.children[1].__kept]")
    assert kept == [1, 1]
    expect(live.get_by_role("heading", name="Title")).to_be_visible()
    expect(alice.locator(".message.role-assistant").last).to_contain_text("END")
    expect(alice.get_by_role("button", name="Send")).to_be_visible()


def test_proj3_known_xss_payloads_neither_run_nor_escape_the_message(
    alice: Any, model: FakeModelServer, profile: Any
) -> None:
    dialogs: list[str] = []
    alice.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    baseline = alice.evaluate(INSPECT)
    failures: list[str] = []
    for i, payload in enumerate(PAYLOADS):
        answer = ask(alice, model, payload, question=f"Payload {i}")
        expect(answer.locator(".md")).not_to_be_empty()
        seen = alice.evaluate(INSPECT)
        if (
            seen["problems"]
            or seen["counts"] != baseline["counts"]
            or seen["pwned"]
            or seen["hidden"]
        ):
            failures.append(f"{payload!r}: {seen}")
    # Raw HTML in an answer is shown as text.
    first = alice.locator(".message.role-assistant .md").first
    expect(first).to_have_text("<script>window.__pwned=1</script>")
    # The stored answers, rendered again on opening the chat, are as harmless.
    alice.reload()
    expect(alice.locator(".message.role-assistant")).to_have_count(len(PAYLOADS))
    seen = alice.evaluate(INSPECT)
    if seen["problems"] or seen["counts"] != baseline["counts"] or seen["pwned"]:
        failures.append(f"after reload: {seen}")
    assert failures == []
    assert dialogs == []


def test_proj3_the_archive_shows_answers_in_markdown_too(
    alice: Any, server: Server, profile: Any
) -> None:
    with server.api("alice") as api:
        c = make_conversation(api, profile["id"], title="Archived markdown")
        for role, text in (
            ("user", "**not bold** in a question"),
            ("assistant", "## Done\n\n```sql\nselect 1;\n```\n\n<img src=x onerror=alert(1)>"),
        ):
            r = api.post(
                f"/api/v1/conversations/{c['id']}/messages", json={"role": role, "content": text}
            )
            assert r.status_code == 201, r.text
        assert api.post(f"/api/v1/conversations/{c['id']}/archive").status_code in (200, 204)
    alice.goto(server.url + "/archive/" + c["id"])
    view = alice.locator("#archive-view")
    expect(view.get_by_role("heading", name="Done", level=2)).to_be_visible()
    expect(view.locator(".code-lang")).to_have_text("sql")
    expect(view.locator(".md")).to_contain_text("<img src=x onerror=alert(1)>")
    expect(view.locator(".message.role-user")).to_contain_text("**not bold** in a question")
