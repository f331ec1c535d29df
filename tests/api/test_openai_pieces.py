"""Issue 29: the pure pieces of the OpenAI-compatible endpoint — image data URLs, the
``usage`` object with its details, the provider's usage parsed."""

from __future__ import annotations

import base64

import pytest

from chatmem.errors import InvalidInput
from chatmem.models.stream import Usage, usage_of
from chatmem.turns.events import Done
from chatmem.web.openai_compat.answers import usage_object
from chatmem.web.openai_compat.images import image_bytes


def test_a_data_url_gives_its_bytes() -> None:
    raw = b"\x89PNG\r\n\x1a\nrest"
    url = "data:image/png;base64," + base64.b64encode(raw).decode()
    assert image_bytes(url) == raw
    assert image_bytes(url.replace("image/png;", "image/png;name=a.png;")) == raw


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("https://example.com/a.png", "not fetched"),
        ("http://10.0.0.1/a.png", "not fetched"),
        ("file:///etc/passwd", "base64 data URL"),
        ("data:image/png,plain", "base64 data URL"),
        ("data:application/pdf;base64,AAAA", "not an image"),
        ("data:image/png;base64,%%%", "not valid base64"),
        ("data:image/png;base64,", "empty"),
    ],
)
def test_bad_image_urls(url: str, said: str) -> None:
    with pytest.raises(InvalidInput, match=said):
        image_bytes(url)


def test_usage_details_parsed_when_reported() -> None:
    assert usage_of({"usage": {"prompt_tokens": 9, "completion_tokens": 2}}) == Usage(9, 2)
    reported = usage_of(
        {
            "usage": {
                "prompt_tokens": 9,
                "completion_tokens": 2,
                "prompt_tokens_details": {"cached_tokens": 4},
                "completion_tokens_details": {"reasoning_tokens": 1},
            }
        }
    )
    assert reported == Usage(9, 2, cached_tokens=4, reasoning_tokens=1)
    # A detail group without the count (or with junk) is not reported.
    odd = usage_of({"usage": {"prompt_tokens": 1, "prompt_tokens_details": {"audio_tokens": 0}}})
    assert odd == Usage(1, 0)


def done(usage: dict[str, int]) -> Done:
    return Done(1, "completed", "m", None, usage, 0.0, None, None)


def test_usage_object_carries_details_only_when_known() -> None:
    assert usage_object(done({"prompt_tokens": 3, "completion_tokens": 4})) == {
        "prompt_tokens": 3,
        "completion_tokens": 4,
        "total_tokens": 7,
    }
    full = usage_object(
        done(
            {"prompt_tokens": 3, "completion_tokens": 4, "cached_tokens": 2, "reasoning_tokens": 1}
        )
    )
    assert full["prompt_tokens_details"] == {"cached_tokens": 2}
    assert full["completion_tokens_details"] == {"reasoning_tokens": 1}
