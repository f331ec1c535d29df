"""Files and images in a plan (CTX-16, PROV-4, PROJ-2): how each is sent and its status.

A text file is sent as a message with its name, in the instructions' role: pinned files with
every request, auto files with their message (in memory when it is), files attached to the
conversation rather than a message with every request but in ``off``.  A binary attachment is
never sent: a placeholder in its message stands for it.  An image is sent as an image part
with its message when the profile accepts images, else its placeholder; each image's entry
says why it is not sent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from chatmem.context.images import (
    DRAFT,
    EXCLUDED,
    MESSAGE_NOT_SENT,
    NOT_ACCEPTED,
    NOT_ATTACHED,
    WINDOW_MODE,
    Rider,
)
from chatmem.context.tokens import MESSAGE_OVERHEAD, Tokenizer
from chatmem.context.values import File, FileStatus, InstructionsRole, Mode


def file_block(file: File, role: InstructionsRole = "system") -> dict[str, str]:
    """How a file is sent: a message with its name, in the instructions' role (CTX-16)."""
    return {"role": role, "content": f"File {file.name}:\n\n{file.content}"}


def file_tokens(file: File, tokenizer: Tokenizer) -> int:
    if file.binary:
        return 0  # never sent: its message's placeholder stands for it (PROV-4)
    if file.tokens is not None:
        return file.tokens
    return MESSAGE_OVERHEAD + tokenizer.count(file_block(file)["content"])


def auto_file_tokens(files: Sequence[File], tokenizer: Tokenizer) -> dict[str, int]:
    """Message id -> tokens of the auto files attached to it (they travel with it)."""
    out: dict[str, int] = {}
    for f in files:
        if f.state == "auto" and f.message_id is not None and not f.binary:
            out[f.message_id] = out.get(f.message_id, 0) + file_tokens(f, tokenizer)
    return out


def file_statuses(
    files: Sequence[File],
    mode: Mode,
    images: Mapping[str, Mapping[str, Any]],
    in_memory_ids: set[str],
) -> tuple[dict[str, FileStatus], list[File]]:
    """Step 4: each file's status (CTX-16) and the text files sent, in order."""
    statuses: dict[str, FileStatus] = {}
    sent: list[File] = []
    for f in files:
        if f.state == "excluded":
            statuses[f.id] = "excluded"
        elif f.binary:  # PROV-4, PROJ-2: a placeholder in its message stands for it
            statuses[f.id] = images[f.id]["status"] if f.id in images else "out_of_memory"
        elif f.state == "pinned":
            statuses[f.id] = "pinned"
            sent.append(f)
        elif (f.message_id is None and mode != "off") or f.message_id in in_memory_ids:
            statuses[f.id] = "in_memory"
            sent.append(f)
        else:
            statuses[f.id] = "out_of_memory"
    return statuses, sent


def image_report(
    files: Sequence[File],
    attached: Mapping[str, Sequence[Rider]],
    in_memory: set[str],
    mode: Mode,
) -> tuple[dict[str, dict[str, Any]], int, int]:
    """PROJ-2: each image's entry in the plan (status, tokens, why it is not sent), the
    tokens of the images sent, and those of the placeholders sent in their stead."""
    report: dict[str, dict[str, Any]] = {}
    images = placeholders = 0
    for rider in (r for group in attached.values() for r in group):
        sent = (rider.file.message_id or DRAFT) in in_memory
        if sent and rider.part is not None:
            images += rider.tokens
            report[rider.file.id] = {"status": "in_memory", "tokens": rider.tokens}
            continue
        if sent:
            placeholders += rider.tokens
        report[rider.file.id] = {
            "status": "out_of_memory",
            "tokens": 0,
            "reason": NOT_ACCEPTED if rider.part is None else MESSAGE_NOT_SENT,
        }
    for f in files:
        if f.image and f.id not in report:
            reason = (
                EXCLUDED
                if f.state == "excluded"
                else NOT_ATTACHED
                if f.message_id is None
                else WINDOW_MODE
                if mode == "window"
                else MESSAGE_NOT_SENT
            )
            status = "excluded" if f.state == "excluded" else "out_of_memory"
            report[f.id] = {"status": status, "tokens": 0, "reason": reason}
    return report, images, placeholders
