"""The streamed read of an import file: sniff the format, then yield one neutral
conversation at a time.

Memory stays bounded by the largest single conversation, whatever the file size: ijson's C
backend builds just the current list item, the converter turns it into an
:class:`ImportedConversation`, and the item is dropped before the next is read.  Any problem
(broken JSON, a wrong field) becomes :class:`ImportFormatError` naming the conversation by
its position, raised before the caller commits anything.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import ijson

from chatmem.errors import ImportFormatError
from chatmem.store.exchange.detect import Format, detect_format
from chatmem.store.exchange.foreign import CONVERTERS
from chatmem.store.exchange.native import native_conversation
from chatmem.store.exchange.records import ImportedConversation
from chatmem.store.exchange.source import ImportSource, Progress

FORMAT_NAMES: dict[str, str] = {
    "chatmem": "chatmem export",
    "chatgpt": "ChatGPT export",
    "claude": "Claude export",
    "openwebui": "Open WebUI export",
}
_PREFIX: dict[str, str] = {"chatmem": "conversations.item"}


def _converter(fmt: Format) -> Callable[[Mapping[str, Any]], ImportedConversation]:
    if fmt == "chatmem":
        return native_conversation
    return CONVERTERS[fmt]


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
    convert = _converter(fmt)
    name = FORMAT_NAMES[fmt]
    stream = source.open(on_progress)
    index = 0
    try:
        for item in ijson.items(stream, _PREFIX.get(fmt, "item"), use_float=True):
            index += 1
            if not isinstance(item, Mapping):
                raise ImportFormatError(f"{name}, conversation {index}: not a JSON object")
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
        raise ImportFormatError("The file is not UTF-8 JSON.") from None
    finally:
        stream.close()
