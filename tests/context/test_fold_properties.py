"""Hypothesis properties of memory that never gets stuck (CTX-21, issue 10 item 4).

Plans over random histories — message sizes from a few tokens to more than the window, tool
call pairs, exclusions, pinned files, existing summaries — on windows from 8,192 to 1,000,000
tokens in every mode and with random knobs; and the fold driver run to its end with a stub
summariser.
"""

from __future__ import annotations

import math

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from chatmem.context import (
    Conversation,
    File,
    Message,
    Mode,
    Profile,
    Summary,
    ToolCall,
    count_message,
    get_tokenizer,
    plan,
)
from chatmem.context.compaction import MIN_ROUND_TOKENS, new_summary_tokens, summary_cap
from chatmem.context.folding import fold, run_fold
from chatmem.context.tokens import MESSAGE_OVERHEAD, count_tools

TOK = get_tokenizer("estimate")
MODES: tuple[Mode, ...] = ("off", "economy", "full", "window")


@st.composite
def knobs(draw: st.DrawFn, windows: st.SearchStrategy[int]) -> Profile:
    window = draw(windows)
    reserve = draw(st.none() | st.integers(0, window // 2))
    return Profile(
        context_window=window,
        answer_reserve=reserve,  # type: ignore[arg-type]  # None: the window's default
        economy_pairs=draw(st.integers(0, 6)),
        economy_batch=draw(st.integers(1, 6)),
        full_threshold_fraction=draw(st.floats(0.1, 1.0)),
        full_keep_messages=draw(st.integers(0, 40)),
        window_messages=draw(st.integers(1, 20)),
        window_chars=draw(st.integers(100, 50_000)),
        instructions_role=draw(st.sampled_from(("system", "developer", "user"))),
        summarizer_window=draw(st.none() | st.integers(8_192, 2 * window)),
    )


@st.composite
def histories(draw: st.DrawFn, window: int, *, cached: bool) -> Conversation:
    """A history whose sizes are relative to ``window``.  ``cached``: counts are handed in
    (as storage does) so sizes up to past a 1M window cost nothing to build; otherwise the
    texts really are that long."""
    sizes = st.sampled_from((0.0005, 0.002, 0.01, 0.05, 0.2, 0.6, 1.3))

    def message(mid: str, role: str, **kw: object) -> Message:
        share = draw(sizes)
        tokens = max(1, int(share * window))
        if cached:
            return Message(mid, role, f"{role} {mid}", tokens=tokens + MESSAGE_OVERHEAD, **kw)  # type: ignore[arg-type]
        return Message(mid, role, "word " * tokens, **kw)  # type: ignore[arg-type]

    messages: list[Message] = []
    for k in range(draw(st.integers(0, 14))):
        excluded = draw(st.integers(0, 5)) == 0
        messages.append(message(f"u{k}", "user", excluded=excluded))
        if draw(st.integers(0, 3)) == 0:
            call = ToolCall(f"c{k}", "lookup", "{}")
            messages.append(
                Message(
                    f"a{k}", "assistant", "", tool_calls=(call,), tokens=None if not cached else 20
                )
            )
            messages.append(message(f"r{k}", "tool", tool_call_id=call.id))
        if draw(st.booleans()) or k < 2:
            messages.append(message(f"z{k}", "assistant"))
    summary = None
    if messages and draw(st.booleans()):
        through = draw(st.sampled_from([m.id for m in messages]))
        summary = Summary("earlier facts " * draw(st.integers(1, 200)), through=through)
    files: list[File] = []
    if draw(st.booleans()):
        state = draw(st.sampled_from(("pinned", "auto", "excluded")))
        tokens = max(1, int(draw(sizes) * window))
        owner = draw(st.sampled_from([None, *[m.id for m in messages]]))
        files.append(File("f1", "notes.txt", "note", message_id=owner, state=state, tokens=tokens))
    return Conversation(
        messages=tuple(messages),
        summary=summary,
        files=tuple(files),
        instructions=draw(st.sampled_from(("", "Answer briefly."))),
    )


def must_send(conversation: Conversation, profile: Profile, draft: str | None) -> int:
    """What every request carries whatever the memory holds (CTX-21)."""
    instructions = (
        MESSAGE_OVERHEAD + TOK.count(conversation.instructions) if conversation.instructions else 0
    )
    pinned = sum(
        f.tokens or 0
        for f in conversation.files
        if f.state == "pinned" or (f.state == "auto" and f.message_id is None)
    )
    drafted = MESSAGE_OVERHEAD + TOK.count(draft) if draft else 0
    return instructions + count_tools(conversation.tools, TOK) + pinned + drafted


@st.composite
def cases(draw: st.DrawFn) -> tuple[Conversation, Profile, Mode, str | None]:
    profile = draw(knobs(st.sampled_from((8_192, 16_384, 32_768, 131_072, 1_000_000))))
    conversation = draw(histories(profile.context_window, cached=True))
    mode = draw(st.sampled_from(MODES))
    draft = draw(st.none() | st.sampled_from(("short q", "word " * 3_000, "word " * 40_000)))
    return conversation, profile, mode, draft


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_the_plan_the_counter_and_the_admission_never_disagree(
    case: tuple[Conversation, Profile, Mode, str | None],
) -> None:
    conversation, profile, mode, draft = case
    result = plan(conversation, profile, mode=mode, draft=draft)
    t = result.tokens
    budget = t.window - t.reserve
    assert t.used == t.instructions + t.tools + t.summary + t.messages + t.files + t.images
    assert t.used + t.reserve + t.free == t.window or (
        t.free == 0 and t.used + t.reserve > t.window
    )
    if result.fits:
        assert t.used <= budget  # every request sent is within the window
    else:
        # the refusal's needed > available, in the same units; the counter is red, and no
        # fold is offered (none would make room)
        assert t.used + t.reserve > t.window
        assert result.level == "red"
        assert not result.compaction.needed
    if result.compaction.needed:
        assert mode in ("economy", "full") and result.fits
        request = result.compaction.request
        assert request is not None and request.rounds >= 1 and request.message_count >= 1
    statuses = result.to_dict()["status"]
    assert list(statuses) == [m.id for m in conversation.messages]  # every message has one
    event(f"fits={result.fits} fold={result.compaction.needed}")


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_admission_is_exactly_fits_after_folding(
    case: tuple[Conversation, Profile, Mode, str | None],
) -> None:
    """CTX-21 both ways: when the current turn, the fixed parts and a summary at its cap fit,
    the turn is admitted; when it is refused, not even the turn and the fixed parts (and a
    summary, when there is memory to keep) fit."""
    conversation, profile, mode, draft = case
    if mode not in ("economy", "full"):
        return
    result = plan(conversation, profile, mode=mode, draft=draft)
    budget = profile.context_window - profile.answer_reserve
    base = must_send(conversation, profile, draft)
    if base + new_summary_tokens(profile) <= budget:
        assert result.fits, (base, result.tokens)
    if not result.fits:
        has_memory = bool(conversation.messages) or conversation.summary is not None
        floor = base + (
            min(new_summary_tokens(profile), result.tokens.summary or 10**9) if has_memory else 0
        )
        assert base > budget or floor > budget or result.tokens.summary > 0


@st.composite
def fold_cases(draw: st.DrawFn) -> tuple[Conversation, Profile, Mode, str | None, int]:
    profile = draw(knobs(st.sampled_from((8_192, 12_000, 16_384))))
    conversation = draw(histories(profile.context_window, cached=False))
    mode = draw(st.sampled_from(("economy", "full")))
    draft = draw(st.none() | st.just("short q"))
    reply_words = draw(st.integers(1, summary_cap(profile) // 2))
    return conversation, profile, mode, draft, reply_words


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fold_cases())
def test_the_fold_driver_folds_within_windows_and_terminates(
    case: tuple[Conversation, Profile, Mode, str | None, int],
) -> None:
    conversation, profile, mode, draft, reply_words = case
    before = plan(conversation, profile, mode=mode, draft=draft)
    history_tokens = sum(count_message(m, TOK) for m in conversation.messages)
    # each round moves past at least one message, or one piece of at least
    # MIN_ROUND_TOKENS of one long message's transcript
    bound = len(conversation.messages) + math.ceil(2 * history_tokens / MIN_ROUND_TOKENS) + 1
    rounds = []
    positions = {m.id: i for i, m in enumerate(conversation.messages)}

    def summarise(request: object) -> str:
        rounds.append(request)
        assert len(rounds) <= bound, "the fold does not terminate"
        return "fact " * reply_words

    result = run_fold(fold(conversation, profile, mode=mode, draft=draft), summarise)
    event(f"rounds={min(len(rounds), 5)} pieces={any(r.piece for r in rounds)}")
    window = profile.summarizer_context
    covered = -1
    for r in rounds:
        sent = sum(MESSAGE_OVERHEAD + TOK.count(m["content"]) for m in r.prompt)
        assert sent + r.max_output_tokens <= window, (sent, r.max_output_tokens, window)
        if r.commit:
            assert positions[r.through] > covered  # each stored summary covers more
            covered = positions[r.through]
    assert result.rounds == len(rounds)
    after = result.plan
    assert after.fits == before.fits  # the plan shown before is what happens
    if before.compaction.needed:
        assert rounds and result.summary is not None
        assert result.summary.through in positions  # covers a stored message: nothing lost
    if after.fits:
        assert after.tokens.used + after.tokens.reserve <= profile.context_window
        assert not after.compaction.needed
    statuses = after.to_dict()["status"]
    assert list(statuses) == [m.id for m in conversation.messages]
