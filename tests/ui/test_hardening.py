"""SEC-3 in the browser: no page breaks its Content-Security-Policy (the probe is proven to
catch a violation), the page cannot be framed, and signing in ends on this site whatever
``next`` a link carried or ``data-next`` holds."""

from __future__ import annotations

import itertools
import re
from typing import Any
from urllib.parse import quote

import pytest
from playwright.sync_api import expect
from tests.api.test_next_path import PIECES
from tests.support.model_server import FakeModelServer
from tests.ui.harness import PASSWORD, Server, make_conversation, open_chat

from chatmem.web.security import safe_next_path

pytestmark = pytest.mark.browser

# Runs before any page script (Playwright injects it outside the page's CSP) and records
# every violation the browser reports.
PROBE = """
window.__csp = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__csp.push(e.violatedDirective + " " + (e.blockedURI || "inline") + " " + (e.sourceFile || ""));
});
"""


def violations(page: Any) -> list[str]:
    return list(page.evaluate("window.__csp || ['probe missing']"))


def test_no_page_violates_the_content_security_policy(
    alice: Any, server: Server, model: FakeModelServer, profiles: Any, console: Any
) -> None:
    alice.add_init_script(PROBE)
    with server.api("alice") as api:
        c = make_conversation(api, profiles["paid"]["id"], pairs=2, title="Strict page")
    for path in ("/", "/profiles", "/archive"):
        response = alice.goto(server.url + path)
        assert response is not None
        assert "frame-ancestors 'none'" in response.headers["content-security-policy"]
        alice.wait_for_load_state("networkidle")
        assert violations(alice) == [], path
    # A chat, with a streamed answer and the memory window (meters set widths from script).
    open_chat(alice, server, c)
    model.reply("A **short** answer with `code`.", delay=0.01)
    draft = alice.get_by_role("textbox", name="Message")
    draft.fill("One more question")
    draft.press("Enter")
    expect(alice.locator(".message.role-assistant").last).to_contain_text("short")
    alice.locator("#counter").click()
    expect(alice.get_by_role("dialog")).to_be_visible()
    alice.keyboard.press("Escape")
    # The search forms (formerly an inline onsubmit) still never submit.
    search = alice.locator("#search")
    search.fill("Strict")
    search.press("Enter")
    expect(alice).to_have_url(server.url + "/c/" + c["id"] + "?q=Strict")
    assert violations(alice) == []
    assert [e for e in console.errors if "Content Security Policy" in e] == []


def test_the_probe_catches_a_violation(page: Any, server: Server, console: Any) -> None:
    """Without this, an empty list above could mean a blind probe."""
    console.allow("Content Security Policy")
    page.add_init_script(PROBE)
    page.goto(server.url + "/")
    page.evaluate(
        """() => {
          const s = document.createElement("script");
          s.textContent = "window.__ran = true";
          document.body.append(s);
          const d = document.createElement("div");
          d.setAttribute("style", "color: red");
          document.body.append(d);
        }"""
    )
    page.wait_for_function("window.__csp.length >= 2")
    found = violations(page)
    assert any(v.startswith("script-src") for v in found), found
    assert any(v.startswith("style-src") for v in found), found
    assert page.evaluate("window.__ran === undefined")


def test_the_page_cannot_be_framed(page: Any, server: Server, console: Any) -> None:
    console.allow("frame-ancestors|Refused to (display|frame)")
    page.set_content(f'<iframe id="f" src="{server.url}/"></iframe>')
    page.wait_for_timeout(500)
    frame = page.frame_locator("#f")
    expect(frame.get_by_role("heading", name="Sign in")).to_have_count(0)


@pytest.mark.parametrize(
    "hostile",
    [
        "/\\evil.example/x",
        "/\t/evil.example",
        "//evil.example/x",
        "https://evil.example/",
        "javascript:alert(1)",
        "/\\/evil.example",
    ],
)
def test_signin_js_follows_only_a_path_on_this_site(
    page: Any, server: Server, hostile: str
) -> None:
    """The server never renders such a ``data-next``; the script asks the server anyway."""
    page.goto(server.url + "/")
    page.evaluate("(v) => { document.getElementById('signin-form').dataset.next = v; }", hostile)
    page.get_by_label("Name").fill("alice")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_selector("#draft")
    # The home page, by way of the server's answer to ``/?next=…``.
    assert page.url.split("?")[0] == server.url + "/", page.url


def test_signin_js_keeps_a_path_on_this_site(page: Any, server: Server) -> None:
    page.goto(server.url + "/?next=/profiles")
    page.get_by_label("Name").fill("alice")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Model profiles")).to_be_visible()


EVIL = re.compile(r"^https?://evil\.example")


@pytest.mark.parametrize("script", [True, False], ids=["signin.js", "form post"])
@pytest.mark.parametrize(
    "hostile",
    [
        "/.//evil.example/steal",
        "/x/..//evil.example",
        "/%2e//evil.example",
        "/%2E%2e//evil.example",
        "/\\evil.example",
        "/%5Cevil.example",
        "/%2F/evil.example",
        "/\t/evil.example",
        "/\n/evil.example",
    ],
)
def test_signing_in_with_a_hostile_next_ends_on_this_site(
    page: Any, server: Server, console: Any, hostile: str, script: bool
) -> None:
    """A link's ``next`` that a browser normalises to ``//evil.example…`` used to pass both
    checks; ``location.assign`` then left the site (the form post's redirect stayed, on a
    path that named the other host)."""
    page.route(EVIL, lambda route: route.fulfill(body="<h1>stolen</h1>", content_type="text/html"))
    if not script:
        console.allow("ERR_FAILED")  # the held-back script
        page.route("**/static/signin.js*", lambda route: route.abort())
    page.goto(server.url + "/?next=" + quote(hostile, safe=""))
    page.get_by_label("Name").fill("alice")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#draft").or_(page.get_by_text("stolen"))).to_be_visible()
    assert page.url == server.url + "/", page.url


def test_the_servers_next_is_exactly_what_chromium_makes_of_it(page: Any, server: Server) -> None:
    """Chromium's URL parser checks ``safe_next_path`` over every short mix of the hostile
    pieces: each answer is a path on the site that Chromium leaves as it is, and each
    ``next`` not refused is normalised exactly as Chromium normalises it."""
    values = ["/" + "".join(mix) for n in range(4) for mix in itertools.product(PIECES, repeat=n)]
    cases = [[value, safe_next_path(value)] for value in values]
    page.goto(server.url + "/")
    wrong = page.evaluate(
        """(cases) => {
          const base = "https://site.example/x/y";
          const wrong = [];
          for (const [value, answer] of cases) {
            const url = new URL(answer, base);
            if (url.origin !== "https://site.example" || url.href !== "https://site.example" + answer) {
              wrong.push(["answer", value, answer, url.href]);
            } else if (answer !== "/" && new URL(value, base).href !== url.href) {
              wrong.push(["normalised", value, answer, new URL(value, base).href]);
            }
          }
          return wrong;
        }""",
        cases,
    )
    assert len(cases) > 9000 and wrong == [], wrong[:20]


def test_the_api_docs_page_works_with_no_other_host_reachable(
    page: Any, server: Server, console: Any
) -> None:
    """Swagger UI used to come from a CDN: cut off from it, the page showed nothing."""
    site = server.url + "/"
    elsewhere: list[str] = []

    def only_this_site(route: Any) -> None:
        if route.request.url.startswith(site):
            route.continue_()
        else:
            elsewhere.append(route.request.url)
            route.abort()

    console.allow("ERR_FAILED")  # reported below, through ``elsewhere``
    page.route("**/*", only_this_site)
    page.add_init_script(PROBE)
    page.goto(server.url + "/api/docs")
    operations = page.locator(".opblock")
    expect(operations.first).to_be_visible()
    profiles = page.locator(".opblock-summary-path", has_text="/api/v1/profiles").first
    expect(profiles).to_be_visible()
    assert operations.count() > 20
    # Opening an operation works under the policy too.
    profiles.click()
    expect(page.locator(".opblock.is-open .opblock-section")).to_be_visible()
    assert elsewhere == [] and violations(page) == []
