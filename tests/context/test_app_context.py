"""APPS-3 in the engine: an app's model context is sent after the instructions, counted from
its cached count (never re-tokenized) as its own "Apps" row, and priced with the request."""

from __future__ import annotations

from chatmem.context import AppContext, Prices, Profile, plan
from chatmem.context.app_context import render_app_context

from .helpers import conv, pairs


class CountingTokenizer:
    name = "estimate"

    def __init__(self) -> None:
        self.seen: list[str] = []

    def count(self, text: str) -> int:
        self.seen.append(text)
        return len(text) // 4 + 1


TEXT = render_app_context(
    "get_weather", "weather", [{"type": "text", "text": "The user picked Oslo."}], {"city": "Oslo"}
)


def test_apps3_app_context_is_sent_after_the_instructions_and_counted_as_its_own_row() -> None:
    profile = Profile(context_window=8_192, prices=Prices(input_per_mtok=1_000_000.0))
    tok = CountingTokenizer()
    without = plan(
        conv(pairs(3), instructions="Be brief."), profile, mode="full", draft="hi", tokenizer=tok
    )
    c = conv(pairs(3), instructions="Be brief.", app_context=AppContext(TEXT, tokens=321))
    result = plan(c, profile, mode="full", draft="hi", tokenizer=tok)
    assert result.messages[0] == {"role": "system", "content": "Be brief."}
    assert result.messages[1] == {"role": "system", "content": TEXT}
    assert TEXT not in tok.seen  # its cached count is used, never a new count
    assert result.tokens.apps == 321
    assert without.tokens.apps == 0
    assert result.tokens.used == without.tokens.used + 321
    assert result.tokens.free == without.tokens.free - 321
    assert result.to_dict()["tokens"]["apps"] == 321
    # priced like every other row: the request costs 321 tokens more
    assert round(result.price.next_request - without.price.next_request, 6) == 321.0


def test_apps3_app_context_is_sent_in_every_mode_with_the_instructions_role() -> None:
    profile = Profile(instructions_role="developer")
    c = conv(pairs(2), app_context=AppContext(TEXT, tokens=50))
    for mode in ("off", "economy", "full", "window"):
        result = plan(c, profile, mode=mode, draft="next")
        assert {"role": "developer", "content": TEXT} in result.messages, mode
        assert result.tokens.apps == 50


def test_apps3_app_context_takes_room_from_history_never_silently() -> None:
    profile = Profile(context_window=4_096, answer_reserve=1_024)
    history = pairs(40, size=100)
    roomy = plan(conv(history), profile, mode="full")
    crowded = plan(conv(history, app_context=AppContext(TEXT, tokens=2_000)), profile, mode="full")
    assert crowded.tokens.used <= 4_096 - 1_024
    assert crowded.tokens.used + crowded.tokens.reserve + crowded.tokens.free == 4_096
    # less history fits beside it; what does not is shown (summarized or out of memory)
    in_memory = sum(s == "in_memory" for s in crowded.status.values())
    assert in_memory < sum(s == "in_memory" for s in roomy.status.values())


def test_apps3_render_names_the_app_and_keeps_what_the_model_can_read() -> None:
    text = render_app_context(
        "get_weather",
        "weather",
        [
            {"type": "text", "text": "Selected: Oslo"},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
            {"type": "resource", "resource": {"uri": "ui://w/state", "text": "state=1"}},
        ],
        {"b": 2, "a": 1},
    )
    assert "“get_weather”" in text and "“weather”" in text
    assert "Selected: Oslo" in text and "state=1" in text
    assert "AAAA" not in text and "[image content not shown]" in text
    assert text.endswith('structuredContent: {"a":1,"b":2}')
