"""APPS-1, APPS-2: reading an app resource — what it declares, bounded, and its HTML."""

from __future__ import annotations

import base64

import pytest
from mcp.types import BlobResourceContents, ReadResourceResult, TextResourceContents

from chatmem.tools.apps import (
    APP_MIME_TYPE,
    MAX_HTML_BYTES,
    TOO_LARGE,
    ResourceUi,
    app_document,
    is_app_mime,
    resource_ui,
)

URI = "ui://w/app.html"


def text(body: str, mime: str = APP_MIME_TYPE, meta: dict[str, object] | None = None) -> object:
    return ReadResourceResult(
        contents=[TextResourceContents(uri=URI, mime_type=mime, text=body, _meta=meta)]
    )


def test_a_resources_declarations_are_read_bounded_APPS_2() -> None:
    ui = resource_ui(
        {
            "ui": {
                "csp": {"connectDomains": ["https://a.example", 3, "x" * 300] + ["https://b"] * 5},
                "permissions": {"camera": {}, "teleport": {}},
                "prefersBorder": "yes",
            }
        }
    )
    assert ui.csp["connect_domains"] == ("https://a.example", "https://b")
    assert ui.csp["frame_domains"] == ()
    assert ui.permissions == frozenset({"camera"})
    assert ui.prefers_border is None
    assert ui.granted({"camera", "microphone"}) == {
        "camera": True,
        "microphone": False,
        "geolocation": False,
        "clipboard_write": False,
    }
    assert ResourceUi.parse(ui.to_json()) == ui
    many = resource_ui({"ui": {"csp": {"resourceDomains": [f"https://{i}.x" for i in range(99)]}}})
    assert len(many.csp["resource_domains"]) == 32


def test_an_app_document_is_its_html_with_its_declarations_APPS_1() -> None:
    meta = {"ui": {"prefersBorder": False, "csp": {"frameDomains": ["https://f.example"]}}}
    document = app_document(text("<!doctype html><p>hi</p>", meta=meta), URI)
    assert document.html == "<!doctype html><p>hi</p>" and document.problem is None
    assert document.ui.prefers_border is False
    assert document.ui.csp["frame_domains"] == ("https://f.example",)
    blob = base64.b64encode("<p>é</p>".encode()).decode()
    result = ReadResourceResult(
        contents=[BlobResourceContents(uri=URI, mime_type=APP_MIME_TYPE, blob=blob)]
    )
    assert app_document(result, URI).html == "<p>é</p>"


@pytest.mark.parametrize(
    ("result", "problem"),
    [
        (text("<p>x</p>", mime="text/html"), "is not text/html;profile=mcp-app"),
        (text("x" * (MAX_HTML_BYTES + 1)), TOO_LARGE),
        (ReadResourceResult(contents=[]), "sent no content"),
        (
            ReadResourceResult(
                contents=[BlobResourceContents(uri=URI, mime_type=APP_MIME_TYPE, blob="@@")]
            ),
            "not valid base64",
        ),
        (
            ReadResourceResult(
                contents=[
                    BlobResourceContents(
                        uri=URI, mime_type=APP_MIME_TYPE, blob=base64.b64encode(b"\xff").decode()
                    )
                ]
            ),
            "not UTF-8",
        ),
    ],
)
def test_what_is_not_an_app_is_not_shown_APPS_1(result: object, problem: str) -> None:
    document = app_document(result, URI)
    assert document.html is None and problem in (document.problem or "")


@pytest.mark.parametrize(
    ("mime", "ok"),
    [
        ("text/html;profile=mcp-app", True),
        ("Text/HTML; profile=mcp-app", True),
        ("text/html", False),
        ("text/plain;profile=mcp-app", False),
        (None, False),
    ],
)
def test_the_app_type_is_recognised_APPS_1(mime: object, ok: bool) -> None:
    assert is_app_mime(mime) is ok
