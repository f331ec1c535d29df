"""The feed beyond plain answers: long conversations render incrementally, tool calls and
results (stored and live), and a dropped event stream that resumes. (TURN-4, TURN-6)"""

from __future__ import annotations

import json
from typing import Any

import pytest
from playwright.sync_api import expect
from tests.support.mcp_server import running_mcp_server, wait_until_ready
from tests.support.model_server import FakeModelServer
from tests.ui.harness import CuttableProxy, Server, make_conversation, make_profile

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def profiles(server: Server, model: FakeModelServer) -> dict[str, dict[str, Any]]:
    with server.api("alice") as api:
        return {
            "main": make_profile(api, model.base_url, "Fake model"),
            "other": make_profile(api, model.base_url, "Second model", context_window=65536),
            "stateless": make_profile(api, model.base_url, "Forgetful model", stateless=True),
        }


def _export_with(messages: int) -> bytes:
    rows = [
        {
            "id": f"m{i}",
            "role": "user" if i % 2 == 0 else "assistant",
            "content": f"Message number {i}",
            "excluded": False,
            "created_at": "2026-11-30T10:00:00Z",
        }
        for i in range(messages)
    ]
    doc = {
        "format": "chatmem.export/1",
        "conversations": [
            {
                "id": "long1",
                "title": "A very long conversation",
                "folder": None,
                "pinned": False,
                "mode": "full",
                "summary": None,
                "messages": rows,
                "files": [],
            }
        ],
    }
    return json.dumps(doc).encode()


def test_long_conversations_render_incrementally(alice: Any, server: Server, profiles: Any) -> None:
    with server.api("alice") as api:
        result = api.post(
            "/api/v1/import",
            content=_export_with(650),
            headers={"Content-Type": "application/json"},
        )
        assert result.status_code == 200, result.text
        cid = result.json()["conversation_ids"][0]
    alice.goto(server.url + "/c/" + cid)
    messages = alice.locator("#messages > .message")
    expect(messages.last).to_contain_text("Message number 649")
    expect(messages).to_have_count(200)
    expect(alice.get_by_role("button", name="Load earlier messages")).to_be_visible()
    # Scrolling to the top brings 200 more each time.
    alice.locator("#feed").evaluate("f => f.scrollTop = 0")
    expect(messages).to_have_count(400)
    alice.locator("#feed").evaluate("f => f.scrollTop = 0")
    expect(messages).to_have_count(600)
    # The button does the same (dispatched: a real click would scroll the feed to the top first).
    alice.get_by_role("button", name="Load earlier messages").dispatch_event("click")
    expect(messages).to_have_count(650)
    expect(messages.first).to_contain_text("Message number 0")
    expect(alice.get_by_role("button", name="Load earlier messages")).to_be_hidden()


def test_tool_calls_and_results_are_shown(alice: Any, server: Server, profiles: Any) -> None:
    with server.api("alice") as api:
        c = make_conversation(api, profiles["main"]["id"], title="Tools")
        path = f"/api/v1/conversations/{c['id']}/messages"
        api.post(path, json={"role": "user", "content": "Search for cats"}).raise_for_status()
        api.post(
            path,
            json={
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": "call1", "name": "search", "arguments": '{"q": "cats"}'}],
            },
        ).raise_for_status()
        api.post(
            path, json={"role": "tool", "content": "3 results about cats", "tool_call_id": "call1"}
        ).raise_for_status()
        api.post(
            path, json={"role": "assistant", "content": "I found 3 results."}
        ).raise_for_status()
    alice.goto(server.url + "/c/" + c["id"])
    call = alice.locator(".tool-call")
    expect(call.locator("summary")).to_have_text("Tool call: search")
    call.locator("summary").click()
    expect(call.locator("pre")).to_have_text('{"q": "cats"}')
    result = alice.locator(".tool-result")
    expect(result.locator("summary")).to_have_text("Tool result: search")
    result.locator("summary").click()
    expect(result.locator("pre")).to_have_text("3 results about cats")


def test_turn4_live_tool_calls_and_results_stream_into_the_feed(
    alice: Any, server: Server, model: FakeModelServer, profiles: Any
) -> None:
    server.add_user("toolsadmin", admin=True)
    with running_mcp_server(token="mcp-secret") as mcp, server.api("toolsadmin") as admin:
        created = admin.post(
            "/api/v1/mcp-servers",
            json={"name": "tools", "url": mcp.url, "bearer_token": "mcp-secret"},
        )
        assert created.status_code == 201, created.text
        wait_until_ready(admin.get, created.json()["id"])
        try:
            model.tool_call("add", {"a": 2, "b": 3}, id="call_add")
            model.reply("Two plus three is 5.", delay=0.02)
            alice.get_by_role("textbox", name="Message").fill("What is 2 + 3? Use the tool.")
            alice.get_by_role("textbox", name="Message").press("Enter")
            call = alice.locator(".tool-call").first
            expect(call.locator("summary")).to_have_text("Tool call: add")
            result = alice.locator(".tool-result").first
            expect(result.locator("summary")).to_have_text("Tool result: add")
            expect(alice.locator(".message.role-assistant").last).to_contain_text(
                "Two plus three is 5."
            )
            expect(alice.get_by_role("button", name="Send")).to_be_visible()
            # After the run the stored history shows the same call and result.
            alice.reload()
            expect(alice.locator(".tool-call summary")).to_have_text("Tool call: add")
            alice.locator(".tool-result summary").click()
            expect(alice.locator(".tool-result pre")).to_contain_text("5")
        finally:
            admin.delete(f"/api/v1/mcp-servers/{created.json()['id']}")


def test_turn6_a_dropped_stream_resumes_without_losing_or_repeating_text(
    alice: Any, server: Server, model: FakeModelServer, profiles: Any, console: Any
) -> None:
    console.allow("ERR_INCOMPLETE_CHUNKED_ENCODING")  # the deliberately cut stream
    proxy = CuttableProxy(int(server.url.rsplit(":", 1)[1]))
    try:
        alice.goto(proxy.url + "/")  # the session cookie is per host, so it holds here too
        # Record the live answer's text at every change, before the final reload replaces it.
        alice.evaluate("""() => { window.__live = [];
            new MutationObserver(() => {
                const node = document.querySelector('.message.streaming .content');
                if (node) window.__live.push(node.textContent);
            }).observe(document.getElementById('messages'), {subtree: true, childList: true, characterData: true}); }""")
        words = [f"w{i}" for i in range(50)]
        model.reply(" ".join(words), delay=0.08)
        alice.get_by_role("textbox", name="Message").fill("Count for me")
        events: list[Any] = []
        alice.on("request", lambda r: events.append(r) if "/events" in r.url else None)
        alice.get_by_role("button", name="Send").click()
        expect(alice.locator(".message.streaming .content")).to_contain_text("w5")
        proxy.cut()  # the EventSource connection drops; the browser reconnects by itself
        answer = alice.locator(".message.role-assistant").last
        expect(answer).to_contain_text("w49", timeout=20_000)
        expect(alice.get_by_role("button", name="Send")).to_be_visible()
        assert len(events) >= 2, "the browser reconnected"
        assert int(events[-1].all_headers()["last-event-id"]) > 0
        snapshots = [text.split() for text in alice.evaluate("window.__live")]
        assert all(seen == words[: len(seen)] for seen in snapshots), "nothing lost or repeated"
        assert snapshots[-1] == words, "the live text reached the end before the reload"
    finally:
        proxy.close()
