"""PROV-4: how an MCP tool result becomes text and attachments (the MCP SDK's own types)."""

from __future__ import annotations

import base64

from mcp.types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

from chatmem.tools.results import bounded, human_size, placeholder, tool_content

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(200)) * 10


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def test_text_stays_text_and_images_become_attachments_in_place() -> None:
    result = CallToolResult(
        content=[
            TextContent(type="text", text="before"),
            ImageContent(type="image", data=_b64(PNG), mime_type="image/png"),
            ImageContent(type="image", data=_b64(b"GIF89a..."), mime_type="image/gif"),
            AudioContent(type="audio", data=_b64(b"RIFF....WAVE"), mime_type="audio/wav"),
            TextContent(type="text", text="after"),
        ]
    )
    content = tool_content(result, "get-tiny-image")
    names = [a.name for a in content.attachments]
    assert names == ["get-tiny-image.png", "get-tiny-image.gif", "get-tiny-image.wav"]
    assert [a.mime for a in content.attachments] == ["image/png", "image/gif", "audio/wav"]
    assert content.attachments[0].data == PNG
    assert content.text.splitlines() == [
        "before",
        "[image/png, 2.0 KB, attached as file get-tiny-image.png]",
        "[image/gif, 9 bytes, attached as file get-tiny-image.gif]",
        "[audio/wav, 12 bytes, attached as file get-tiny-image.wav]",
        "after",
    ]
    assert _b64(PNG)[:40] not in content.text


def test_two_images_of_one_type_get_distinct_names() -> None:
    image = ImageContent(type="image", data=_b64(PNG), mime_type="image/png")
    content = tool_content(CallToolResult(content=[image, image]), "shot")
    assert [a.name for a in content.attachments] == ["shot.png", "shot-2.png"]


def test_embedded_resources_blob_is_an_attachment_named_by_its_uri_text_stays_text() -> None:
    result = CallToolResult(
        content=[
            EmbeddedResource(
                type="resource",
                resource=BlobResourceContents(
                    uri="file:///tmp/report%201.pdf",
                    mime_type="application/pdf",
                    blob=_b64(b"%PDF"),
                ),
            ),
            EmbeddedResource(
                type="resource",
                resource=TextResourceContents(uri="file:///notes.md", text="# Notes"),
            ),
            EmbeddedResource(
                type="resource",
                resource=BlobResourceContents(uri="memo://x", blob=_b64(b"\x00\x01")),
            ),
            ResourceLink(type="resource_link", name="site", uri="https://example.org/a"),
        ]
    )
    content = tool_content(result, "fetch")
    assert [(a.name, a.mime) for a in content.attachments] == [
        ("report_201.pdf", "application/pdf"),
        ("x.bin", "application/octet-stream"),
    ]
    lines = content.text.splitlines()
    assert lines[0] == "[application/pdf, 4 bytes, attached as file report_201.pdf]"
    assert lines[1] == "# Notes"
    assert lines[2] == "[application/octet-stream, 2 bytes, attached as file x.bin]"
    assert "https://example.org/a" in lines[3]


def test_invalid_base64_is_not_kept_and_not_sent_as_text() -> None:
    bad = ImageContent.model_construct(type="image", data="not base64!!", mime_type="image/png")
    content = tool_content(CallToolResult(content=[bad]), "t")
    assert content.attachments == ()
    assert content.text == "[image/png: the tool sent data that is not valid base64; not kept]"


def test_structured_content_alone_is_its_json() -> None:
    result = CallToolResult(content=[], structured_content={"a": 1})
    assert tool_content(result, "t").text == '{"a": 1}'


def test_attachments_past_the_bound_are_not_kept_and_their_placeholder_says_so() -> None:
    image = ImageContent(type="image", data=_b64(PNG), mime_type="image/png")
    small = ImageContent(type="image", data=_b64(b"tiny"), mime_type="image/png")
    content = tool_content(CallToolResult(content=[image, small]), "t")
    text, kept = bounded(content.text, content.attachments, 1024)
    assert [a.name for a in kept] == ["t-2.png"]
    assert text.splitlines()[0] == (
        "[image/png, 2.0 KB: larger than the 1.0 KB this server keeps; not kept]"
    )
    assert text.splitlines()[1] == placeholder("image/png", 4, "t-2.png")
    assert bounded(content.text, content.attachments, None) == (
        content.text,
        content.attachments,
    )


def test_sizes_read_like_the_issue() -> None:
    assert human_size(5_530) == "5.4 KB"
    assert human_size(3 * 1024 * 1024) == "3.0 MB"
    assert placeholder("image/png", 5_530, "a.png") == "[image/png, 5.4 KB, attached as file a.png]"
