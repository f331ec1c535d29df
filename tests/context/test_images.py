"""PROJ-2 in the engine: images ride with their messages — as image parts and in the Images
row for a profile that takes images, as a placeholder (counted with the messages) otherwise;
a pair is kept only if it fits with its images; every image says why it is not sent; the
project's instructions come first (PROJ-1)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from tests.context.helpers import conv, pairs

from chatmem.context import Conversation, File, Profile, plan
from chatmem.context.images import IMAGE_REF, NOT_ACCEPTED, openai_tile_tokens

VISION = Profile(model="gpt-4o", accepts_images=True)
TEXT = Profile(model="gpt-4o")


def photo(fid: str, message_id: str | None, size: int = 1024, **kw: object) -> File:
    return File(fid, f"{fid}.png", "", message_id, mime="image/png", width=size, height=size, **kw)  # type: ignore[arg-type]


def test_a_vision_profile_gets_parts_and_the_images_row() -> None:
    history = pairs(2)
    result = plan(conv(history, files=(photo("f1", "m2"),)), VISION, mode="full")
    question = next(m for m in result.messages if isinstance(m["content"], list))
    assert question["content"] == [
        {"type": "text", "text": history[2].content},
        {"type": "image_url", "image_url": {"url": IMAGE_REF + "f1"}},
    ]
    assert result.tokens.images == 765
    assert result.files["f1"] == "in_memory"
    assert result.images == {"f1": {"status": "in_memory", "tokens": 765}}
    without = plan(conv(history), VISION, mode="full")
    assert result.tokens.used == without.tokens.used + 765


def test_a_text_profile_gets_the_placeholder_counted_with_the_messages() -> None:
    history = pairs(2)
    result = plan(conv(history, files=(photo("f1", "m2"),)), TEXT, mode="full")
    sent = [m["content"] for m in result.messages]
    assert f"{history[2].content}\n\n[image: f1.png — this model does not accept images]" in sent
    assert result.tokens.images == 0
    assert result.files["f1"] == "out_of_memory"
    assert result.images["f1"] == {"status": "out_of_memory", "tokens": 0, "reason": NOT_ACCEPTED}
    without = plan(conv(history), TEXT, mode="full")
    assert result.tokens.messages > without.tokens.messages


def test_a_pair_is_kept_only_if_it_fits_with_its_image() -> None:
    history = pairs(3)
    small = Profile(model="gpt-4o", accepts_images=True, context_window=2_000, answer_reserve=1_500)
    big = photo("f1", "m0", size=4096)  # 765 tokens: more than the 500 the window leaves
    result = plan(conv(history, files=(big,)), small, mode="window")
    assert result.images["f1"]["reason"] == "the window mode sends text only"
    result = plan(conv(history, files=(big,)), small, mode="full")
    assert result.status["m0"] != "in_memory" and result.status["m4"] == "in_memory"
    assert result.images["f1"] == {
        "status": "out_of_memory",
        "tokens": 0,
        "reason": "its message is not in memory",
    }
    assert result.tokens.images == 0


def test_an_excluded_image_or_one_without_a_question_is_not_sent() -> None:
    history = pairs(1)
    files = (photo("gone", "m0", state="excluded"), photo("loose", None))
    result = plan(conv(history, files=files), VISION, mode="full")
    assert result.files["gone"] == "excluded"
    assert result.images["gone"]["reason"] == "excluded"
    assert result.images["loose"]["reason"] == "not attached to a message yet"
    assert result.tokens.images == 0
    # With a draft, the loose image goes with it (the question being typed).
    drafting = plan(conv(history, files=files), VISION, mode="full", draft="and this?")
    assert drafting.messages[-1]["content"] == [
        {"type": "text", "text": "and this?"},
        {"type": "image_url", "image_url": {"url": IMAGE_REF + "loose"}},
    ]
    assert drafting.tokens.images == 765


def test_an_answer_cannot_carry_image_parts() -> None:
    history = pairs(1)
    result = plan(conv(history, files=(photo("f1", "m1"),)), VISION, mode="full")
    answer = result.messages[-1]
    assert answer["role"] == "assistant" and isinstance(answer["content"], str)
    assert "[image: f1.png" in answer["content"]


def test_project_instructions_come_first_and_count_as_instructions() -> None:
    conversation = Conversation(
        messages=tuple(pairs(1)), instructions="Mine.", project_instructions="Ours."
    )
    result = plan(conversation, Profile(), mode="full")
    assert [m["content"] for m in result.messages[:2]] == ["Ours.", "Mine."]
    alone = plan(
        Conversation(messages=tuple(pairs(1)), instructions="Mine."), Profile(), mode="full"
    )
    assert result.tokens.instructions > alone.tokens.instructions


@given(
    st.integers(1, 6),
    st.lists(st.tuples(st.integers(0, 11), st.integers(16, 5000)), max_size=5),
    st.booleans(),
    st.sampled_from(("off", "economy", "full", "window")),
    st.integers(1_500, 8_000),
)
def test_a_plan_that_fits_never_exceeds_the_window_with_images(
    count: int, pictures: list[tuple[int, int]], vision: bool, mode: str, window: int
) -> None:
    history = pairs(count, size=40)
    files = tuple(
        photo(f"f{k}", f"m{index % (2 * count)}", size=side)
        for k, (index, side) in enumerate(pictures)
    )
    profile = Profile(
        model="gpt-4o", accepts_images=vision, context_window=window, answer_reserve=1_024
    )
    result = plan(conv(history, files=files), profile, mode=mode)  # type: ignore[arg-type]
    tokens = result.tokens
    assert tokens.used == (
        tokens.instructions
        + tokens.tools
        + tokens.summary
        + tokens.messages
        + tokens.files
        + tokens.images
    )
    if result.fits:
        assert tokens.used + tokens.reserve <= window
    assert set(result.images) == {f.id for f in files}
    sent = sum(v["tokens"] for v in result.images.values())
    assert sent == tokens.images
    for f in files:
        assert (result.images[f.id]["status"] == "in_memory") == (result.files[f.id] == "in_memory")
    assert openai_tile_tokens(1, 1) == 255
