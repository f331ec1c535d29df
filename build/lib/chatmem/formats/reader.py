"""The streamed read of an import file: sniff the format, then yield one neutral
conversation at a time.

Memory stays bounded by the largest single conversation, whatever the file size: ijson's C
backend builds just the current list item, the converter turns it into an
:class:`ImportedConversation`, and the item is dropped before the next is read.  The source's
streams are bounded before ijson sees them (SEC-1: nesting depth, string length, one
conversation's size — :class:`~chatmem.bounds.JsonScanner`), and a chatmem export's top-level
keys are checked as they pass.  Text holding NUL (``\\u0000``, which JSON allows and
PostgreSQL cannot store) is kept with U+FFFD in its place, in every field and on every
backend; lone surrogates never get this far (ijson refuses them, or reads a lone high one as
``?``).  Any problem (broken JSON, a wrong field, a bound) becomes an ``invalid_input`` error
naming the conversation by its position or the byte offset, raised before the caller commits
anything.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import ijson

from chatmem.bounds import clean_value
from chatmem.context.document import DOCUMENT_KEYS
from chatmem.errors import ImportFormatError
from chatmem.formats.detect import Format, detect_format
from chatmem.formats.foreign import CONVERTERS
from chatmem.formats.native import native_conversation
from chatmem.formats.records import ImportedConversation
from chatmem.formats.source import ImportSource, Progress

FORMAT_NAMES: dict[str, str] = {
    "chatmem": "chatmem export",
    "chatgpt": "ChatGPT export",
    "claude": "Claude export",
    "openwebui": "Open WebUI export",
}
_PREFIX: dict[str, str] = {"chatmem": "conversations.item"}
# How deep the conversation objects sit: {"conversations": [{…}]} or [{…}].
_ITEM_DEPTH: dict[str, int] = {"chatmem": 3}


def _converter(
    fmt: Format, source: ImportSource
) -> Callable[[Mapping[str, Any]], ImportedConversation]:
    if fmt == "chatmem":
        return native_conversation
    convert = CONVERTERS[fmt]
    return lambda item: convert(item, source.find_asset)


def _single(source: ImportSource) -> bool:
    """Whether a foreign file is one conversation object rather than a list of them."""
    with source.open() as stream:
        head = stream.read(64).lstrip()
    return head.startswith(b"{")


def sniff(source: ImportSource) -> Format:
    if source.total_bytes == 0:
        raise ImportFormatError("The file is empty.")
    with source.open() as stream:
        return detect_format(stream)  # type: ignore[arg-type]


def read_conversations(
    source: ImportSource, fmt: Format | None = None, on_progress: Progress | None = None
) -> Iterator[ImportedConversation]:
    """Every conversation of ``source`` in file order; raises ImportFormatError on bad input."""
    fmt = fmt or sniff(source)
    convert = _converter(fmt, source)
    name = FORMAT_NAMES[fmt]
    single = fmt != "chatmem" and _single(source)  # one ChatGPT / Claude conversation
    stream = source.open(
        on_progress,
        item_depth=1 if single else _ITEM_DEPTH.get(fmt, 2),
        on_top_key=_native_top_key if fmt == "chatmem" else None,
    )
    index = 0
    try:
        prefix = "" if single else _PREFIX.get(fmt, "item")
        for item in ijson.items(stream, prefix, use_float=True):
            index += 1
            if not isinstance(item, Mapping):
                raise ImportFormatError(f"{name}, conversation {index}: not a JSON object")
            if stream.saw_nul:  # PostgreSQL cannot store NUL: U+FFFD on every backend
                item = clean_value(item)
            try:
                yield convert(item)
            except (ValueError, TypeError, KeyError, OverflowError, OSError) as exc:
                raise ImportFormatError(f"{name}, conversation {index}: {exc}") from None
    except ijson.JSONError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else "broken JSON"
        raise ImportFormatError(
            f"The file is not valid JSON (after {stream.bytes_read:,} bytes): {first}"
        ) from None
    except UnicodeDecodeError:
        raise ImportFormatError(NOT_UNICODE) from None
    finally:
        stream.close()


NOT_UNICODE = (
    "The file is not UTF-8 JSON, or holds text that is not valid Unicode (a lone surrogate "
    "such as \\udc00)."
)


def _native_top_key(key: str) -> None:
    if key not in DOCUMENT_KEYS:
        shown = key if len(key) <= 60 else key[:57] + "…"
        raise ImportFormatError(
            f"chatmem export: unknown top-level field {shown!r} (the format has only "
            f"{', '.join(sorted(DOCUMENT_KEYS))})"
        )
