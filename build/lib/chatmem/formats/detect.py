"""Recognise an import file from its first keys, without reading it whole.

* ``{"format": "chatmem.export/1", "conversations": [...]}`` — chatmem's own export.
* ``[{"mapping": {...}, "current_node": ...}, ...]`` — ChatGPT ``conversations.json``.
* ``[{"chat_messages": [...], ...}, ...]`` — Claude ``conversations.json``.
* ``[{"chat": {"messages" | "history": ...}, ...}, ...]`` — Open WebUI "export all chats".
* ``{"mapping": ...}`` / ``{"chat_messages": ...}`` — one ChatGPT or Claude conversation, as
  converters and browser extensions save it (read as a list of one).

The sniff walks the ijson event stream only until the first decisive key, so it costs
microseconds even on a 500 MB file.  Anything else is refused with a message naming what was
found, before the database is touched.
"""

from __future__ import annotations

from typing import BinaryIO, Literal

import ijson

from chatmem.errors import ImportFormatError

Format = Literal["chatmem", "chatgpt", "claude", "openwebui"]
NATIVE_FORMAT = "chatmem.export/1"

_ITEM_KEYS: dict[str, Format] = {
    "mapping": "chatgpt",
    "current_node": "chatgpt",
    "chat_messages": "claude",
    "chat": "openwebui",
}


# Top-level keys of one conversation object (not in a list): ChatGPT's and Claude's own.
_SINGLE_KEYS = frozenset({"mapping", "current_node", "chat_messages"})


def detect_format(stream: BinaryIO) -> Format:
    """Name the format of ``stream`` (read from its start); raise ImportFormatError if unknown."""
    try:
        return _detect(ijson.parse(stream))
    except ijson.JSONError as exc:
        raise ImportFormatError(f"The file is not valid JSON: {_first_line(exc)}") from None
    except UnicodeDecodeError:
        raise ImportFormatError("The file is not UTF-8 JSON.") from None


def _detect(events: object) -> Format:
    iterator = iter(events)  # type: ignore[call-overload]
    first = next(iterator, None)
    if first is None:
        raise ImportFormatError("The file is empty.")
    _, event, _ = first
    if event == "start_map":
        return _detect_native(iterator)
    if event == "start_array":
        return _detect_list(iterator)
    next(iterator, None)  # text after a lone value is a JSON error: report that instead
    raise ImportFormatError("The file holds a single JSON value, not an export.")


def _detect_native(events: object) -> Format:
    for prefix, event, value in events:  # type: ignore[attr-defined]
        if prefix == "format" and event == "string":
            if value == NATIVE_FORMAT:
                return "chatmem"
            raise ImportFormatError(
                f"Unsupported export format {value!r}; this server reads {NATIVE_FORMAT!r}."
            )
        if prefix == "" and event == "map_key" and value in _SINGLE_KEYS:
            return _ITEM_KEYS[value]
        if prefix == "" and event == "map_key" and value == "chat":
            raise ImportFormatError(
                "This looks like a single Open WebUI chat; export all chats (a JSON list) instead."
            )
        if prefix == "" and event == "end_map":
            break
    raise ImportFormatError(
        f'Not a chatmem export: the JSON object has no "format": {NATIVE_FORMAT!r} field.'
    )


def _detect_list(events: object) -> Format:
    for prefix, event, value in events:  # type: ignore[attr-defined]
        if prefix == "" and event == "end_array":
            raise ImportFormatError("The file holds an empty list: there is nothing to import.")
        if prefix == "item" and event == "map_key" and value in _ITEM_KEYS:
            return _ITEM_KEYS[value]
        if prefix == "item" and event not in ("start_map", "map_key", "end_map"):
            raise ImportFormatError("The file is a list, but not a list of conversations.")
        if prefix == "item" and event == "end_map":
            break
    raise ImportFormatError(
        "Unknown export format: expected a chatmem export, or a ChatGPT, Claude or Open WebUI "
        "conversations file."
    )


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
