"""STORE-5: recognising and reading export files as streams, without a database."""

from __future__ import annotations

import io
import json
import tracemalloc
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chatmem.errors import ImportFormatError
from chatmem.formats.native import ExportedConversation, export_chunks
from chatmem.formats.reader import read_conversations, sniff
from chatmem.formats.records import ImportedConversation
from chatmem.formats.source import ImportSource

SAMPLES = Path(__file__).parent / "samples"


def source_of(data: bytes | str) -> ImportSource:
    return ImportSource(io.BytesIO(data.encode() if isinstance(data, str) else data))


def read_all(data: bytes | str) -> list[ImportedConversation]:
    return list(read_conversations(source_of(data)))


def sample(name: str) -> list[ImportedConversation]:
    return list(read_conversations(ImportSource((SAMPLES / name).open("rb"))))


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("chatmem_export.json", "chatmem"),
        ("chatgpt_conversations.json", "chatgpt"),
        ("claude_conversations.json", "claude"),
        ("openwebui_export.json", "openwebui"),
    ],
)
def test_format_is_recognised_from_the_first_keys(name: str, fmt: str) -> None:
    assert sniff(ImportSource((SAMPLES / name).open("rb"))) == fmt


def test_chatgpt_import_follows_the_branch_to_current_node() -> None:
    first, second = sample("chatgpt_conversations.json")
    assert first.title == "Sourdough starter"
    assert first.source_key == "chatgpt:0d6a1c2e-1111-4a5b-9c3d-000000000001"
    # Hidden system prompt, abandoned branches, the model's browser call and the tool result
    # are left out; the image part of a multimodal message (no bytes in a bare JSON file) is
    # a placeholder naming it, its text kept.
    assert [(m.role, m.content) for m in first.messages] == [
        ("user", "How do I feed a sourdough starter?"),
        ("assistant", "Equal weights of flour and water, once a day."),
        ("user", "[image: x]\nWhat about rye flour?"),
        ("assistant", "Rye ferments faster: feed it twice a day."),
    ]
    assert first.messages[0].created_at is not None
    assert first.messages[0].created_at.year == 2025
    assert [m.content for m in second.messages] == ["ping", "pong"]


def test_chatgpt_without_current_node_takes_the_last_leaf() -> None:
    item = {
        "id": "x",
        "title": "t",
        "mapping": {
            "a": {
                "id": "a",
                "parent": None,
                "children": ["b"],
                "message": {"author": {"role": "user"}, "content": {"parts": ["q"]}},
            },
            "b": {
                "id": "b",
                "parent": "a",
                "children": [],
                "message": {"author": {"role": "assistant"}, "content": {"parts": ["r"]}},
            },
        },
    }
    (conversation,) = read_all(json.dumps([item]))
    assert [m.content for m in conversation.messages] == ["q", "r"]
    assert [m.id for m in conversation.messages] == ["a", "b"]  # node ids stand in


def test_claude_import_reads_text_blocks_and_attachments() -> None:
    (conversation,) = sample("claude_conversations.json")
    assert conversation.title == "Trip to Lisbon"
    assert [(m.role, m.content) for m in conversation.messages] == [
        ("user", "Plan three days in Lisbon."),
        ("assistant", "Day 1: Alfama.\n\nDay 2: Belém."),
        ("user", "And day 3?"),
        ("assistant", "Sintra."),
    ]
    (attached,) = conversation.files
    assert (attached.name, attached.content, attached.message_id) == (
        "notes.txt",
        "Arrive Friday 10:00.",
        "c-m1",
    )


def test_openwebui_import_takes_the_visible_branch_or_the_flat_list() -> None:
    branch, flat = sample("openwebui_export.json")
    assert [m.content for m in branch.messages] == [
        "Match an email address?",
        "Try \\S+@\\S+ as a start.",
        "Thanks!",
    ]
    assert branch.pinned is True
    assert [m.role for m in flat.messages] == ["user", "assistant"]


def test_native_sample_keeps_everything() -> None:
    kitchen, empty = sample("chatmem_export.json")
    assert (kitchen.folder, kitchen.pinned, kitchen.mode) == ("Home", True, "economy")
    assert kitchen.profile == {
        "context_window": 32768,
        "answer_reserve": 4096,
        "tokenizer": "estimate",
        "stateless": False,
    }
    assert [m.excluded for m in kitchen.messages] == [False, False, True, True, True, True]
    assert kitchen.messages[3].tool_calls[0].name == "search"
    assert kitchen.messages[4].tool_call_id == "call_1"
    assert kitchen.summaries[-1].through == "e2" + "0" * 30
    assert kitchen.files[0].state == "pinned"
    assert empty.messages == ()


def test_native_profile_never_carries_secrets() -> None:
    """Only the engine's knobs travel; a file naming an API key or an endpoint is refused
    with the field named (SEC-1: our own format has no unknown keys), never half-read."""
    doc: dict[str, Any] = {
        "format": "chatmem.export/1",
        "conversations": [{"id": "c", "profile": {"context_window": 1000}, "messages": []}],
    }
    (conversation,) = read_all(json.dumps(doc))
    assert conversation.profile == {"context_window": 1000}
    doc["conversations"][0]["profile"].update(api_key="sk-secret", base_url="x")
    with pytest.raises(ImportFormatError, match=r"profile\.api_key: unknown field"):
        read_all(json.dumps(doc))


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        ("", "empty"),
        ("not json at all", "not valid JSON"),
        (
            '{"format": "chatmem.export/1", "conversations": [{"id": "c", "messages": [',
            "not valid JSON",
        ),
        ('{"format": "chatmem.export/9", "conversations": []}', "Unsupported export format"),
        ('{"hello": "world"}', 'no "format"'),
        ("[]", "nothing to import"),
        ("[1, 2, 3]", "not a list of conversations"),
        ('[{"foo": 1}]', "Unknown export format"),
        ('"just a string"', "single JSON value"),
        ('[{"mapping": {}, "title": "x"}] trailing', "not valid JSON"),
        (
            '{"format": "chatmem.export/1", "conversations": [{"id": "c", "messages": '
            '[{"id": "m1", "role": "robot", "content": "x"}]}]}',
            "messages[0].role: expected one of",
        ),
        (
            '{"format": "chatmem.export/1", "conversations": [{"id": "c", "messages": '
            '[{"id": "m1", "role": "user", "content": 5}]}]}',
            "messages[0].content: expected a string",
        ),
        (
            '{"format": "chatmem.export/1", "conversations": [{"id": "c", "mode": "turbo", '
            '"messages": []}]}',
            "mode: expected one of",
        ),
        (
            '{"format": "chatmem.export/1", "conversations": [{"id": "c", "summary": '
            '{"text": "s", "through": "m9"}, "messages": []}]}',
            "summary.through: no message",
        ),
        ('[{"chat_messages": "nope"}]', "chat_messages must be a list"),
        ('[{"chat": {"title": "x"}}]', "neither history.messages nor messages"),
    ],
)
def test_malformed_or_foreign_input_is_refused_clearly(data: str, needle: str) -> None:
    with pytest.raises(ImportFormatError) as caught:
        read_all(data)
    assert needle in caught.value.message


def test_zip_of_a_data_export_is_read_from_its_conversations_json() -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("chat.html", "<html></html>")
        archive.write(SAMPLES / "claude_conversations.json", "conversations.json")
    (conversation,) = read_all(buffer.getvalue())
    assert conversation.title == "Trip to Lisbon"


def test_native_writer_streams_a_document_the_reader_accepts() -> None:
    def messages() -> Iterator[dict[str, Any]]:
        for index in range(3):
            yield {"id": f"m{index}", "role": "user", "content": f"hello {index} — ü"}

    conversations = [
        ExportedConversation(head={"id": "a", "title": "A", "summary": None}, messages=messages()),
        ExportedConversation(head={"id": "b", "title": "B"}, messages=iter(())),
    ]
    chunks = list(export_chunks(conversations, exported_at="2026-11-30T00:00:00Z"))
    assert len(chunks) > 5  # produced piece by piece, not as one string
    data = b"".join(chunks)
    assert data.startswith(b'{"format":"chatmem.export/1"')
    parsed = json.loads(data)
    assert [c["id"] for c in parsed["conversations"]] == ["a", "b"]
    assert [c.title for c in read_all(data)] == ["A", "B"]


def _big_chatgpt_file(path: Path, conversations: int, text: str) -> None:
    with path.open("w", encoding="utf-8") as out:
        out.write("[")
        for index in range(conversations):
            mapping = {}
            parent = None
            for turn in range(10):
                node = f"n{turn}"
                mapping[node] = {
                    "id": node,
                    "parent": parent,
                    "children": [f"n{turn + 1}"] if turn < 9 else [],
                    "message": {
                        "id": f"{index}-{node}",
                        "author": {"role": "user" if turn % 2 == 0 else "assistant"},
                        "create_time": 1764489600 + turn,
                        "content": {"content_type": "text", "parts": [text]},
                    },
                }
                parent = node
            item = {
                "id": f"conv-{index}",
                "title": f"c{index}",
                "current_node": "n9",
                "mapping": mapping,
            }
            out.write(("," if index else "") + json.dumps(item))
        out.write("]")


def test_a_large_file_is_read_in_bounded_memory(tmp_path: Path) -> None:
    """STORE-5: memory is bounded by one conversation, not by the file (~20 MB here)."""
    path = tmp_path / "conversations.json"
    _big_chatgpt_file(path, conversations=1_000, text="x" * 2_000)
    size = path.stat().st_size
    assert size > 19_000_000
    seen = []
    tracemalloc.start()
    try:
        with path.open("rb") as raw:
            count = 0
            for conversation in read_conversations(
                ImportSource(raw), on_progress=lambda done, total: seen.append((done, total))
            ):
                count += len(conversation.messages)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 10_000
    assert peak < size / 10, f"peak {peak:,} bytes for a {size:,} byte file"
    assert seen[-1] == (size, size)
    assert [done for done, _ in seen] == sorted(done for done, _ in seen)


def test_a_byte_order_mark_is_tolerated() -> None:
    data = b"\xef\xbb\xbf" + (SAMPLES / "openwebui_export.json").read_bytes()
    assert [c.title for c in read_all(data)] == ["Regex help", "Flat list only"]
    assert [
        c.title for c in read_all(b'\xef\xbb\xbf[{"chat": {"messages": []}, "title": "x"}]')
    ] == ["x"]
