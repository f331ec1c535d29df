"""PROV-4 and CTX-13 end to end through the HTTP API, with the real MCP SDK's server:
binary tool results become attachments (the model gets a placeholder, never base64), and a
tool result too large to send fails the turn naming the tool while the next turn works."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from tests.support.app import make_user
from tests.support.mcp_server import (
    REPORT_PDF,
    TINY_PNG,
    TINY_PNG_BASE64,
    McpServerProcess,
    running_mcp_server,
    wait_until_ready,
)
from tests.support.model_server import FakeModelServer
from tests.turns.conftest import Chat, make_chat

PLACEHOLDER = "[image/png, 4.8 KB, attached as file tiny_image.png]"


@pytest.fixture(scope="module")
def mcp() -> Iterator[McpServerProcess]:
    with running_mcp_server(token="mcp-secret") as server:
        yield server


def _register(client: TestClient, chat: Chat, mcp: McpServerProcess) -> None:
    response = client.post(
        "/api/v1/mcp-servers",
        json={"name": "tools", "url": mcp.url, "bearer_token": "mcp-secret"},
        headers=chat.headers,
    )
    assert response.status_code == 201, response.text
    wait_until_ready(lambda path: client.get(path, headers=chat.headers), response.json()["id"])


@pytest.fixture
def tool_chat(
    turn_client: TestClient, model_server: FakeModelServer, mcp: McpServerProcess
) -> Chat:
    chat = make_chat(turn_client, model_server, admin=True)
    _register(turn_client, chat, mcp)
    return chat


def _sent_texts(model: FakeModelServer) -> list[str]:
    return [str(m.get("content") or "") for r in model.chat_requests for m in r.messages]


def test_prov4_an_image_result_is_an_attachment_and_the_model_gets_a_placeholder(
    tool_chat: Chat, mcp: McpServerProcess
) -> None:
    assert len(TINY_PNG) == 4_908
    tool_chat.model.tool_call("tiny_image", {}, id="call_img")
    tool_chat.model.reply("Here is a tiny picture.")
    run_id = tool_chat.start("Show me the tiny image")
    events = tool_chat.events(run_id)
    assert events[-1]["event"] == "done", events[-1]
    result = next(e for e in events if e["event"] == "tool_result")["data"]
    assert result["content"] == (
        f"This is a tiny image:\n{PLACEHOLDER}\nThe image above is the MCP tiny image."
    )
    [file] = result["files"]
    assert file["name"] == "tiny_image.png" and file["mime"] == "image/png"
    assert file["size"] == len(TINY_PNG)

    # The request after the call carried the placeholder, not base64.
    second = tool_chat.model.chat_requests[-1]
    tool_message = next(m for m in second.messages if m["role"] == "tool")
    assert PLACEHOLDER in tool_message["content"]
    assert all(TINY_PNG_BASE64[:64] not in text for text in _sent_texts(tool_chat.model))

    # Stored: the tool message holds the placeholder; the bytes are a file of that message.
    stored = next(m for m in tool_chat.messages() if m["role"] == "tool")
    assert stored["content"] == result["content"] and stored["id"] == result["message_id"]
    client, headers = tool_chat.client, tool_chat.headers
    content = client.get(f"/api/v1/files/{file['id']}/content", headers=headers)
    assert content.status_code == 200
    assert content.content == TINY_PNG
    assert content.headers["content-type"] == "image/png"
    assert content.headers["x-content-type-options"] == "nosniff"
    described = client.get(f"/api/v1/files/{file['id']}", headers=headers).json()
    assert described["mime"] == "image/png" and described["message_id"] == stored["id"]
    assert described["content_url"] == f"/api/v1/files/{file['id']}/content"
    assert described["tokens"] == 0
    listed = client.get(
        f"/api/v1/conversations/{tool_chat.conversation_id}/messages", headers=headers
    ).json()
    assert any(f.get("id") == file["id"] for f in listed.get("files", [])), listed.keys()

    # Nobody else reads it (STORE-1).
    mallory = make_user(client, "mallory")
    assert (
        client.get(f"/api/v1/files/{file['id']}/content", headers=mallory.headers).status_code
        == 404
    )

    # The next request carries the placeholder again, never the image as text; the plan
    # counts the placeholder only.
    tool_chat.model.reply("You are welcome.")
    assert tool_chat.turn("Thanks!")["status"] == "completed"
    last = tool_chat.model.chat_requests[-1]
    assert any(PLACEHOLDER in str(m.get("content")) for m in last.messages)
    assert all(TINY_PNG_BASE64[:64] not in str(m.get("content")) for m in last.messages)
    plan = client.get(
        f"/api/v1/conversations/{tool_chat.conversation_id}/context", headers=headers
    ).json()
    assert plan["files"][file["id"]] == "out_of_memory"
    assert plan["status"][stored["id"]] == "in_memory"


def test_prov4_an_embedded_binary_resource_is_an_attachment_served_as_a_download(
    tool_chat: Chat,
) -> None:
    tool_chat.model.tool_call("report_pdf", {}, id="call_pdf")
    tool_chat.model.reply("The report is attached.")
    run = tool_chat.turn("Get the Q3 report")
    assert run["status"] == "completed", run
    stored = next(m for m in tool_chat.messages() if m["role"] == "tool")
    size = f"{len(REPORT_PDF) / 1024:.1f} KB"
    assert stored["content"] == f"[application/pdf, {size}, attached as file q3.pdf]"
    with tool_chat.client.app.state.db.session() as session:  # type: ignore[attr-defined]
        from sqlalchemy import select

        from chatmem.store.tables.conversations import File

        file_id = session.scalar(select(File.id).where(File.message_id == stored["id"]))
    response = tool_chat.client.get(f"/api/v1/files/{file_id}/content", headers=tool_chat.headers)
    assert response.content == REPORT_PDF
    assert response.headers["content-type"] == "application/octet-stream"
    assert response.headers["content-disposition"] == 'attachment; filename="q3.pdf"'


def test_ctx13_a_result_too_large_fails_the_turn_naming_the_tool_and_the_next_turn_works(
    turn_client: TestClient, model_server: FakeModelServer, mcp: McpServerProcess
) -> None:
    chat = make_chat(turn_client, model_server, admin=True, profile={"context_window": 8192})
    _register(turn_client, chat, mcp)
    chat.model.tool_call("huge_text", {"kilobytes": 64}, id="call_huge")
    run_id = chat.start("Export every order")
    events = chat.events(run_id)
    run = chat.wait(run_id)
    assert run["status"] == "failed"
    assert run["error"]["code"] == "does_not_fit"
    message = run["error"]["message"]
    assert "huge_text" in message and "kept in the conversation" in message
    assert "The message does not fit" not in message  # not blamed on the user's message
    assert events[-1]["event"] == "error" and "huge_text" in events[-1]["data"]["message"]
    assert len(chat.model.chat_requests) == 1  # the result was never sent
    stored = chat.messages()
    assert [m["role"] for m in stored] == ["user", "assistant", "tool"]
    assert len(stored[-1]["content"]) == 64 * 1024  # kept whole

    # The next turn is not blocked: the pair is ordinary history (folded here).
    chat.model.reply("Here is a shorter summary of the orders.")
    run = chat.turn("Just tell me how many there are")
    assert run["status"] == "completed", run
    last = chat.model.chat_requests[-1]
    assert last.messages[-1] == {"role": "user", "content": "Just tell me how many there are"}
    assert all("parcel 998877665544" not in str(m.get("content")) for m in last.messages)
    plan = turn_client.get(
        f"/api/v1/conversations/{chat.conversation_id}/context", headers=chat.headers
    ).json()
    assert plan["fits"] and plan["status"][stored[-1]["id"]] == "summarized"
