"""Hypothesis properties of the engine (issue 2, item 5)."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from chatmem.context import Conversation, Message, Mode, Profile, Summary, ToolCall, plan

MARKER = re.compile(r"\[… (\d+) characters omitted …\]$")
MODES: tuple[Mode, ...] = ("off", "economy", "full", "window")


@st.composite
def conversations(draw: st.DrawFn) -> tuple[Conversation, dict[str, str]]:
    """Random histories: pairs with optional tool calls (some without results), exclusions,
    sometimes a summary; returns the conversation and each message's original content."""
    messages: list[Message] = []
    originals: dict[str, str] = {}
    text = st.text(alphabet="ab cd\nйф中🙂", max_size=300) | st.just("x" * 9_000)
    count = draw(st.integers(0, 12))
    for k in range(count):
        excluded = draw(st.booleans()) and draw(st.booleans())
        messages.append(Message(f"u{k}", "user", draw(text), excluded=excluded))
        if draw(st.booleans()):
            call = ToolCall(f"c{k}", "f", "{}")
            messages.append(Message(f"a{k}", "assistant", draw(text), tool_calls=(call,)))
            if draw(st.booleans()):
                messages.append(Message(f"r{k}", "tool", draw(text), tool_call_id=call.id))
        if draw(st.booleans()):
            messages.append(Message(f"z{k}", "assistant", draw(text)))
    for m in messages:
        originals[m.id] = m.content
    summary = None
    if messages and draw(st.booleans()):
        through = draw(st.sampled_from([m.id for m in messages]))
        summary = Summary("summary text", through=through)
    return Conversation(messages=tuple(messages), summary=summary), originals


profiles = st.builds(
    Profile,
    context_window=st.integers(2_000, 40_000),
    answer_reserve=st.integers(0, 2_000),
    window_messages=st.integers(1, 14),
    window_chars=st.integers(40, 9_000),
    economy_pairs=st.integers(0, 4),
    economy_batch=st.integers(1, 4),
    full_keep_messages=st.integers(0, 22),
)
modes = st.sampled_from(MODES)
drafts = st.none() | st.text(max_size=50)


@settings(max_examples=150, deadline=None)
@given(conversations(), profiles, modes, drafts)
def test_a_plan_that_fits_never_exceeds_the_window_minus_the_reserve(
    data: tuple[Conversation, dict[str, str]], profile: Profile, mode: Mode, draft: str | None
) -> None:
    result = plan(data[0], profile, mode=mode, draft=draft)
    t = result.tokens
    if result.fits:
        assert t.used <= t.window - t.reserve
    assert t.free >= 0
    assert t.used == t.instructions + t.tools + t.summary + t.messages + t.files + t.images


@settings(max_examples=150, deadline=None)
@given(conversations(), profiles, drafts)
def test_window_mode_never_exceeds_its_character_budget_and_markers_are_exact(
    data: tuple[Conversation, dict[str, str]], profile: Profile, draft: str | None
) -> None:
    conversation, originals = data
    result = plan(conversation, profile, mode="window", draft=draft)
    history = [m for m in result.messages if m["role"] != "system"]
    assert sum(len(m["content"]) for m in history) <= profile.window_chars
    assert len(history) <= profile.window_messages
    sources = [*originals.values(), *([draft] if draft else [])]
    for m in history:
        found = MARKER.search(m["content"])
        if found:
            kept = m["content"][: found.start()]
            dropped = int(found.group(1))
            assert any(s.startswith(kept) and len(s) - len(kept) == dropped for s in sources)


@settings(max_examples=150, deadline=None)
@given(conversations(), profiles, modes)
def test_every_stored_message_gets_exactly_one_status(
    data: tuple[Conversation, dict[str, str]], profile: Profile, mode: Mode
) -> None:
    conversation = data[0]
    status = plan(conversation, profile, mode=mode).to_dict()["status"]
    assert list(status) == [m.id for m in conversation.messages]
    assert set(status.values()) <= {"in_memory", "summarized", "excluded", "out_of_memory"}
    for m in conversation.messages:
        if m.excluded:
            assert status[m.id] == "excluded"


@settings(max_examples=150, deadline=None)
@given(conversations(), profiles, st.sampled_from(("economy", "full", "off")))
def test_a_tool_call_is_never_sent_without_its_result(
    data: tuple[Conversation, dict[str, str]], profile: Profile, mode: Mode
) -> None:
    result = plan(data[0], profile, mode=mode)
    calls = [c["id"] for m in result.messages for c in m.get("tool_calls", [])]
    results = [m["tool_call_id"] for m in result.messages if m["role"] == "tool"]
    assert sorted(calls) == sorted(results)


@settings(max_examples=100, deadline=None)
@given(conversations(), profiles, modes, drafts)
def test_the_same_input_always_gives_the_same_plan(
    data: tuple[Conversation, dict[str, str]], profile: Profile, mode: Mode, draft: str | None
) -> None:
    first = plan(data[0], profile, mode=mode, draft=draft)
    second = plan(data[0], profile, mode=mode, draft=draft)
    assert first == second
    assert first.to_dict() == second.to_dict()


@settings(max_examples=100, deadline=None)
@given(conversations(), profiles, modes)
def test_in_memory_statuses_match_what_is_sent(
    data: tuple[Conversation, dict[str, str]], profile: Profile, mode: Mode
) -> None:
    result = plan(data[0], profile, mode=mode)
    in_memory = [k for k, v in result.status.items() if v == "in_memory"]
    history = [m for m in result.messages if m["role"] != "system"]
    assert len(in_memory) == len(history)


@settings(max_examples=100, deadline=None)
@given(conversations(), profiles, modes, st.data())
def test_the_turn_in_progress_is_always_sent(
    data: tuple[Conversation, dict[str, str]], profile: Profile, mode: Mode, pick: st.DataObject
) -> None:
    """TURN-5/CTX-13: every message of the turn in progress is sent in every mode."""
    conversation = Conversation(messages=data[0].messages)
    users = [i for i, m in enumerate(conversation.messages) if m.role == "user"]
    if not users:
        return
    start = pick.draw(st.sampled_from(users))
    turn = conversation.messages[start:]
    result = plan(conversation, profile, mode=mode, turn_start=turn[0].id)
    sent = [m["content"] for m in result.messages]
    for m in turn:
        if result.status[m.id] == "in_memory" and not m.tool_calls:
            assert m.content in sent
    assert result.status[turn[0].id] == "in_memory"
    assert all(result.status[m.id] != "excluded" for m in turn)
