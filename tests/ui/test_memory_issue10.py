"""Issue 10, what the user sees: the counter of a chat not created yet (CTX-17), the memory
window as the request will be sent after folding (CTX-18, CTX-21), live folding progress and
the marker's total (CTX-10), "free" only for free models, no "Compress now" for a model that
does not remember (CTX-7), reading and editing the summary and continuing in a new chat
(CTX-23).

Where the server's part is not what is under test (a fold of many rounds, which needs a long
backlog and a summariser), the page is given the CONTRACT's plan and event shapes through
Playwright routes; everything else runs against the real server."""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
from playwright.sync_api import expect
from tests.support.model_server import FakeModelServer
from tests.ui.harness import Server, make_conversation, make_profile, open_chat, save_screenshot

pytestmark = pytest.mark.browser

COUNTER = re.compile(r"^\d+(\.\d)?K? / 16K$")


@pytest.fixture(scope="module")
def stateless(server: Server, model: FakeModelServer) -> dict[str, Any]:
    with server.api("alice") as api:
        return make_profile(
            api,
            model.base_url,
            "Forgetful model",
            context_window=16384,
            answer_reserve=1024,
            input_price_per_mtok=3.0,
            output_price_per_mtok=15.0,
            stateless=True,
        )


def compacted(api: Any, model: FakeModelServer, c: dict[str, Any], text: str) -> dict[str, Any]:
    """Compress now through the API, the fake model writing ``text`` as the summary."""
    model.reply(text)
    response = api.post(f"/api/v1/conversations/{c['id']}/compact", json={})
    assert response.status_code == 200, response.text
    return dict(response.json())


def counter_value(page: Any) -> str:
    return str(page.locator("#counter-text").inner_text())


def planned(response: Any) -> dict[str, str]:
    """What a plan request asked for: the query of a GET, the JSON body of a POST (a draft
    too long for a URL goes in a body)."""
    if response.request.method == "POST":
        return {k: str(v) for k, v in (response.request.post_data_json or {}).items()}
    return {k: v[0] for k, v in parse_qs(urlparse(response.url).query).items()}


# ---------- 1. the counter of a new chat (CTX-17) ----------


def test_ctx17_a_new_chat_counter_follows_the_draft_model_and_mode(
    alice: Any, server: Server, profiles: Any
) -> None:
    paid = profiles["paid"]["id"]
    alice.get_by_label("Model", exact=True).select_option(paid)
    counter = alice.locator("#counter")
    expect(alice.locator("#counter-text")).to_have_text(COUNTER)
    expect(counter).to_have_class("counter level-muted")
    empty = counter_value(alice)
    draft = alice.get_by_role("textbox", name="Message")
    with alice.expect_response(
        lambda r: f"/api/v1/profiles/{paid}/context" in r.url and "draft" in planned(r)
    ) as asked:
        draft.fill("word " * 6_000)  # ≈ 9.6K tokens of 16K: 59 %
    assert asked.value.status == 200
    assert planned(asked.value)["mode"] == "full"
    expect(counter).to_have_class("counter level-light")
    expect(alice.locator("#counter-text")).not_to_have_text(empty)
    assert not counter_value(alice).startswith("Free")  # a priced model (CTX-17, CTX-18)
    draft.fill("word " * 9_000)
    expect(counter).to_have_class("counter level-red")
    # The chosen memory mode travels with the plan of the new chat.
    with alice.expect_response(
        lambda r: f"/api/v1/profiles/{paid}/context" in r.url and planned(r).get("mode") == "off"
    ):
        alice.get_by_role("switch", name="Conversation context").uncheck()
    # The memory window shows the new chat's plan; what needs a conversation is not offered.
    alice.locator("#counter").click()
    dialog = alice.get_by_role("dialog")
    expect(dialog).to_be_visible()
    expect(dialog.locator("#mw-mode")).to_have_text("No memory")
    expect(dialog.locator("#mw-used")).to_have_text(re.compile(r"^Used ≈ [\d,]+ of 16,384 tokens$"))
    expect(dialog.get_by_role("button", name=re.compile(r"^Compress now"))).to_have_count(0)
    expect(dialog.get_by_role("button", name="Continue in a new chat")).to_have_count(0)
    alice.keyboard.press("Escape")
    # Another model: its own window and price.
    alice.get_by_label("Model", exact=True).select_option(profiles["free"]["id"])
    expect(alice.locator("#counter-text")).to_have_text(re.compile(r"^Free · \d+(\.\d)?K? / 16K$"))


def test_ctx17_the_first_message_of_a_new_chat_keeps_the_counter_live(
    alice: Any, server: Server, model: FakeModelServer, profiles: Any
) -> None:
    """Once the first message created the conversation, the counter follows its plan."""
    alice.get_by_label("Model", exact=True).select_option(profiles["paid"]["id"])
    expect(alice.locator("#counter-text")).to_have_text(COUNTER)
    model.reply("Hello back.")
    draft = alice.get_by_role("textbox", name="Message")
    draft.fill("Hello there")
    draft.press("Enter")
    expect(alice.locator(".message.role-assistant").last).to_contain_text("Hello back.")
    expect(alice).to_have_url(re.compile(r"/c/[\w-]+$"))
    conversation_id = alice.url.rsplit("/", 1)[1]
    with alice.expect_response(
        lambda r: f"/api/v1/conversations/{conversation_id}/context" in r.url
    ):
        draft.fill("And one more thing")
    expect(alice.locator("#counter-text")).to_have_text(COUNTER)


# ---------- 2. the window as the request will be sent after folding (CTX-18, CTX-21) ----------


def _with_compaction(route: Any, compaction: dict[str, Any], price: float | None) -> None:
    """The real plan, with the compaction fields of a long fold."""
    plan = route.fetch().json()
    plan["compaction"] = {**plan.get("compaction", {}), **compaction}
    plan["price"] = dict(plan.get("price", {}))
    if price is None:
        plan["price"].pop("compaction", None)
    else:
        plan["price"]["compaction"] = price
    route.fulfill(
        status=200, content_type="application/json", body=json.dumps(plan, ensure_ascii=False)
    )


def test_ctx21_the_window_shows_the_fold_price_with_its_messages_and_rounds(
    alice: Any, server: Server, profiles: Any
) -> None:
    with server.api("alice") as api:
        c = make_conversation(api, profiles["paid"]["id"], pairs=2, title="Long backlog")
    # The plan the page gets: the real one, with the compaction fields of `served`.
    served: dict[str, Any] = {
        "compaction": {
            "needed": True,
            "threshold": 13107,
            "messages": 120,
            "covered": 130,
            "rounds": 3,
        },
        "price": 0.0123,
    }
    alice.route(
        re.compile(rf".*/api/v1/conversations/{c['id']}/context.*"),
        lambda route: _with_compaction(route, served["compaction"], served["price"]),
    )
    open_chat(alice, server, c)
    line = alice.locator("#mw-compaction-price")
    alice.locator("#counter").click()
    expect(line).to_have_text("+ memory compression ≈ $0.012 · 120 messages in 3 rounds")
    alice.keyboard.press("Escape")
    # One round: the price alone.
    served["compaction"] = {"needed": True, "threshold": 13107, "messages": 8, "rounds": 1}
    alice.locator("#counter").click()
    expect(line).to_have_text("+ memory compression ≈ $0.012")
    alice.keyboard.press("Escape")
    # Fields the plan does not carry are left out of the text.
    served["compaction"] = {"needed": True, "threshold": 13107}
    served["price"] = None
    alice.locator("#counter").click()
    expect(line).to_have_text("+ memory compression")
    alice.keyboard.press("Escape")
    # Nothing to fold: no line at all.
    served["compaction"] = {"needed": False, "threshold": 13107, "messages": 0, "rounds": 0}
    served["price"] = 0.0
    alice.locator("#counter").click()
    expect(line).to_be_hidden()


def test_ctx18_the_real_fold_price_is_shown_when_the_plan_folds(
    alice: Any, server: Server, profiles: Any
) -> None:
    with server.api("alice") as api:
        c = make_conversation(api, profiles["paid"]["id"], title="Past the threshold")
        path = f"/api/v1/conversations/{c['id']}/messages"
        for i in range(15):  # 30 long messages: past the 13K auto-compress threshold
            for role in ("user", "assistant"):
                body = {"role": role, "content": f"{role} {i} " + "detail " * 400}
                api.post(path, json=body).raise_for_status()
        plan = api.get(f"/api/v1/conversations/{c['id']}/context").json()
    assert plan["compaction"]["needed"] is True
    open_chat(alice, server, c)
    alice.locator("#counter").click()
    expect(alice.locator("#mw-compaction-price")).to_have_text(
        re.compile(r"^\+ memory compression ≈ \$[\d.]+( · [\d,]+ messages in \d+ rounds)?$")
    )
    # What the fold will summarise is marked in the feed already (CTX-14).
    folded = sum(1 for s in plan["status"].values() if s != "in_memory")
    assert folded > 0
    expect(alice.locator("#messages > .message.dimmed")).to_have_count(folded)


def test_ctx14_switching_to_economy_marks_what_leaves_the_memory_at_once(
    alice: Any, server: Server, profiles: Any
) -> None:
    with server.api("alice") as api:
        c = make_conversation(api, profiles["paid"]["id"], pairs=10, title="To economy")
    open_chat(alice, server, c)
    expect(alice.locator("#messages > .message")).to_have_count(20)
    expect(alice.locator("#messages > .message.dimmed")).to_have_count(0)
    # The choice is stored (a PATCH) before the plan is read back: wait for it, not a time.
    with alice.expect_response(lambda r: r.request.method == "PATCH" and c["id"] in r.url):
        alice.get_by_label("Memory mode", exact=True).select_option(label="Economy")
    with server.api("alice") as api:
        plan = api.get(f"/api/v1/conversations/{c['id']}/context").json()
    assert plan["mode"] == "economy"
    out = [mid for mid, s in plan["status"].items() if s != "in_memory"]
    assert out, plan["status"]
    expect(alice.locator("#messages > .message.dimmed")).to_have_count(len(out))
    for mid in out[:3]:
        expect(alice.locator(f'#messages > .message[data-id="{mid}"]')).to_have_class(
            re.compile(r"\bdimmed\b")
        )
        expect(
            alice.locator(f'#messages > .message[data-id="{mid}"]').get_by_role(
                "button", name="Out of memory"
            )
        ).to_be_visible()
    # And back: everything is sent verbatim again.
    alice.get_by_label("Memory mode", exact=True).select_option(label="Everything")
    expect(alice.locator("#messages > .message.dimmed")).to_have_count(0)


# ---------- 3. folding live: progress, then the marker's total (CTX-10, CTX-21) ----------


def _sse(events: list[tuple[int, str, dict[str, Any]]], retry: int = 200) -> str:
    out = [f"retry: {retry}\n\n"]
    for seq, name, data in events:
        out.append(f"id: {seq}\nevent: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n")
    return "".join(out)


def test_ctx10_a_fold_in_rounds_shows_progress_then_the_total(
    alice: Any, server: Server, profiles: Any
) -> None:
    """The run's `compaction` events as the CONTRACT gives them: while `final` is false the
    feed says how far the fold got; the final event's marker counts every message the summary
    covers (`total`), not only this fold's (`count`)."""
    with server.api("alice") as api:
        c = make_conversation(api, profiles["paid"]["id"], pairs=3, title="Folding live")
        messages = api.get(f"/api/v1/conversations/{c['id']}/messages").json()["items"]
    through = messages[3]["id"]  # the second answer
    stage = {"final": False}

    def events(route: Any) -> None:
        progress = [
            (1, "compaction", {"final": False, "round": 1, "rounds": 3}),
            (2, "compaction", {"final": False, "round": 2, "rounds": 3}),
        ]
        final = (
            3,
            "compaction",
            {
                "message": "Memory compressed — 4 earlier messages summarised",
                "count": 2,
                "total": 4,
                "round": 3,
                "rounds": 3,
                "final": True,
                "summary_id": "s-live",
                "summary_version": 2,
                "through": through,
            },
        )
        body = _sse([final] if stage["final"] else progress)
        route.fulfill(status=200, content_type="text/event-stream", body=body)

    alice.route(
        re.compile(rf".*/api/v1/conversations/{c['id']}/turns$"),
        lambda route: route.fulfill(
            status=202, content_type="application/json", body=json.dumps({"run_id": "run-live"})
        ),
    )
    alice.route(re.compile(r".*/api/v1/runs/run-live/events$"), events)
    alice.route(
        re.compile(rf".*/api/v1/conversations/{c['id']}/summary$"),
        lambda route: route.fulfill(
            status=200,
            content_type="application/json",
            body=json.dumps({"text": "Goal: four messages, folded live.", "version": 2}),
        ),
    )
    open_chat(alice, server, c)
    draft = alice.get_by_role("textbox", name="Message")
    draft.fill("Fold it")
    draft.press("Enter")
    progress = alice.locator(".compaction-progress")
    expect(progress).to_have_text("Compressing memory… round 2 of ≈3")
    expect(progress).to_have_attribute("role", "status")
    expect(alice.locator(".compaction-marker")).to_have_count(0)
    stage["final"] = True
    marker = alice.locator(".compaction-marker")
    expect(marker.locator(".compaction-text")).to_have_text(
        "Memory compressed — 4 earlier messages summarised"
    )
    expect(progress).to_have_count(0)
    # After the last message the summary covers.
    expect(alice.locator("#messages > li").nth(4)).to_have_class(re.compile("compaction-marker"))
    marker.get_by_role("button", name="Show summary").click()
    expect(marker.locator(".summary-text")).to_have_text("Goal: four messages, folded live.")


def test_ctx10_the_stored_marker_counts_every_message_the_summary_covers(
    alice: Any, server: Server, model: FakeModelServer, profiles: Any
) -> None:
    """Two folds: the marker of the stored summary says how many messages it covers in all."""
    with server.api("alice") as api:
        c = make_conversation(api, profiles["paid"]["id"], pairs=4, title="Two folds")
        compacted(api, model, c, "Goal: first fold.")
        path = f"/api/v1/conversations/{c['id']}/messages"
        for i in range(4, 8):
            for role, text in (("user", f"Question {i}?"), ("assistant", f"Answer {i}.")):
                api.post(path, json={"role": role, "content": text}).raise_for_status()
        second = compacted(api, model, c, "Goal: both folds.")
        summary = api.get(f"/api/v1/conversations/{c['id']}/summary").json()
        items = api.get(path).json()["items"]
    total = [m["id"] for m in items].index(summary["through"]) + 1
    assert summary["message_count"] == total
    assert second.get("count", total) < total  # this fold alone covered fewer
    open_chat(alice, server, c)
    marker = alice.locator(".compaction-marker")
    expect(marker.locator(".compaction-text")).to_have_text(
        f"Memory compressed — {total} earlier messages summarised"
    )
    expect(alice.locator("#messages > li").nth(total)).to_have_class(
        re.compile("compaction-marker")
    )


# ---------- 4. "free" only for free models; 5. nothing to compress for stateless ----------


def test_ctx18_a_priced_model_with_nothing_to_compress_shows_no_price(
    alice: Any, server: Server, profiles: Any
) -> None:
    with server.api("alice") as api:
        c = make_conversation(api, profiles["paid"]["id"], pairs=1, title="Nothing to fold")
    open_chat(alice, server, c)
    expect(alice.locator("#counter-text")).not_to_have_text(re.compile("^Free"))
    with alice.expect_response(lambda r: "/compact/price" in r.url):
        alice.locator("#counter").click()
    dialog = alice.get_by_role("dialog")
    expect(dialog.locator("#compress-button")).to_have_text("Compress now")
    expect(dialog.locator("#mw-compaction-price")).to_be_hidden()
    expect(dialog.locator("#mw-price")).to_have_text(
        re.compile(r"^Next request ≈ \$[\d.]+ \+ answer$")
    )


def test_ctx18_a_free_model_says_free(alice: Any, server: Server, profiles: Any) -> None:
    with server.api("alice") as api:
        c = make_conversation(api, profiles["free"]["id"], pairs=4, title="Free to fold")
    open_chat(alice, server, c)
    with alice.expect_response(lambda r: "/compact/price" in r.url):
        alice.locator("#counter").click()
    dialog = alice.get_by_role("dialog")
    expect(dialog.locator("#compress-button")).to_have_text("Compress now · free")
    expect(dialog.locator("#mw-price")).to_have_text("Next request: free")


def test_ctx7_a_model_that_does_not_remember_offers_no_compress_now(
    alice: Any, server: Server, stateless: Any
) -> None:
    with server.api("alice") as api:
        c = make_conversation(api, stateless["id"], pairs=3, title="Forgetful", mode="off")
    open_chat(alice, server, c)
    expect(alice.get_by_role("switch", name="Conversation context")).to_be_disabled()
    expect(alice.get_by_label("Memory mode", exact=True)).to_be_disabled()
    expect(alice.locator("#mode-note")).to_have_text(
        "This model does not remember previous messages"
    )
    alice.locator("#counter").click()
    dialog = alice.get_by_role("dialog")
    expect(dialog.locator("#mw-mode")).to_have_text("No memory")
    expect(dialog.locator("#mw-stateless")).to_be_visible()
    expect(dialog.get_by_role("link", name="Change")).to_have_count(0)
    expect(dialog.get_by_role("button", name=re.compile(r"^Compress now"))).to_have_count(0)
    expect(dialog.get_by_role("heading", name="Compress now")).to_have_count(0)


# ---------- 6. reading and editing the summary (CTX-23) ----------


def test_ctx23_show_summary_edit_cancel_save_and_errors_in_place(
    alice: Any, server: Server, model: FakeModelServer, profiles: Any, console: Any
) -> None:
    with server.api("alice") as api:
        c = make_conversation(api, profiles["paid"]["id"], pairs=4, title="Edit the summary")
        compacted(api, model, c, "Goal: discuss topics. Key facts: the first version.")
        before = api.get(f"/api/v1/conversations/{c['id']}/summary").json()
    open_chat(alice, server, c)
    marker = alice.locator(".compaction-marker")
    show = marker.locator(".show-summary")
    marker.get_by_role("button", name="Show summary").click()
    expect(show).to_have_attribute("aria-expanded", "true")
    expect(marker.locator(".summary-text")).to_contain_text("the first version")
    edit = marker.get_by_role("button", name="Edit the summary")
    text = marker.get_by_role("textbox", name="Summary text")
    # Cancel leaves everything as it was.
    edit.click()
    expect(text).to_be_focused()
    expect(text).to_have_value(re.compile("the first version"))
    text.fill("Something else")
    marker.get_by_role("button", name="Cancel").click()
    expect(text).to_be_hidden()
    expect(marker.locator(".summary-text")).to_contain_text("the first version")
    expect(edit).to_be_focused()
    # An empty text is refused; the server's message is shown in place.
    console.allow("422")
    edit.click()
    text.fill("   ")
    marker.get_by_role("button", name="Save").click()
    error = marker.locator(".summary-error")
    expect(error).to_be_visible()
    expect(error).not_to_have_text("")
    expect(text).to_be_visible()
    save_screenshot(alice, "summary-edit.png")
    # Saved: a new version, and the counter follows the new text.
    text.fill("Goal: discuss topics. Key facts: the edited version, longer " + "fact " * 200)
    with alice.expect_response(
        lambda r: f"/api/v1/conversations/{c['id']}/context" in r.url
    ) as plan:
        marker.get_by_role("button", name="Save").click()
    assert plan.value.status == 200
    expect(marker.locator(".summary-text")).to_contain_text("the edited version")
    expect(text).to_be_hidden()
    expect(error).to_be_hidden()
    expect(marker.locator(".summary-status")).to_have_text(
        f"Saved as version {before['version'] + 1}."
    )
    with server.api("alice") as api:
        after = api.get(f"/api/v1/conversations/{c['id']}/summary").json()
        context = api.get(f"/api/v1/conversations/{c['id']}/context").json()
    assert after["version"] == before["version"] + 1
    assert after["text"].startswith("Goal: discuss topics. Key facts: the edited version")
    assert context["tokens"]["summary"] > 200
    # Still there after a reload.
    open_chat(alice, server, c)
    alice.locator(".compaction-marker").get_by_role("button", name="Show summary").click()
    expect(alice.locator(".compaction-marker .summary-text")).to_contain_text("the edited version")


# ---------- 7. continue in a new chat (CTX-23) ----------


def test_ctx23_continue_in_a_new_chat_opens_it_and_lists_it(
    alice: Any, server: Server, model: FakeModelServer, profiles: Any
) -> None:
    with server.api("alice") as api:
        plain = make_conversation(api, profiles["paid"]["id"], pairs=1, title="No summary yet")
        c = make_conversation(api, profiles["paid"]["id"], pairs=4, title="Source talk")
        compacted(api, model, c, "Goal: carry on. Key facts: the source summary.")
    # Without a summary there is nothing to continue from.
    open_chat(alice, server, plain)
    alice.locator("#counter").click()
    expect(alice.get_by_role("dialog")).to_be_visible()
    expect(alice.get_by_role("button", name="Continue in a new chat")).to_have_count(0)
    alice.keyboard.press("Escape")

    open_chat(alice, server, c)
    alice.locator("#counter").click()
    dialog = alice.get_by_role("dialog")
    expect(dialog.get_by_role("button", name="Continue in a new chat")).to_be_visible()
    save_screenshot(alice, "memory-window-continue.png")
    dialog.get_by_role("button", name="Continue in a new chat").click()
    expect(dialog).to_be_hidden()
    expect(alice).to_have_url(re.compile(r"/c/[\w-]+$"))
    expect(alice).not_to_have_url(re.compile(rf"/c/{c['id']}$"))
    new_id = alice.url.rsplit("/", 1)[1]
    expect(alice.locator("#chat-title")).to_have_text("Source talk (continued)")
    expect(alice.locator("#messages > .message")).to_have_count(0)
    # The sidebar lists it, as current.
    link = alice.locator(f'#conversation-list a[data-id="{new_id}"]')
    expect(link).to_have_text("Source talk (continued)")
    expect(link).to_have_attribute("aria-current", "page")
    # It starts from the summary, which can be read there and links back to its source.
    marker = alice.locator(".compaction-marker")
    expect(marker.locator(".compaction-text")).to_have_text(
        "This chat continues from the summary of an earlier chat"
    )
    expect(marker.get_by_role("link", name="Open the earlier chat")).to_have_attribute(
        "href", f"/c/{c['id']}"
    )
    marker.get_by_role("button", name="Show summary").click()
    expect(marker.locator(".summary-text")).to_contain_text("the source summary")
    # The counter is the new chat's: its summary is in memory.
    alice.locator("#counter").click()
    expect(alice.locator("tr[data-key=summary] td")).not_to_have_text("0")
    alice.keyboard.press("Escape")
    # Back to the source.
    alice.go_back()
    expect(alice.locator("#chat-title")).to_have_text("Source talk")
