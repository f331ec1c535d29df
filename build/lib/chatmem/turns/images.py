"""PROJ-2: the images of a planned request, put in place just before it is sent.

The engine plans an image as an ``image_url`` part whose URL names the stored file
(``chatmem.context.images.IMAGE_REF`` + its id): plans stay small and the context endpoint
never ships megabytes of base64.  :func:`inline_images` swaps those references for the
images' ``data:`` URLs, read in the step's own transaction.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from chatmem.context.images import IMAGE_REF
from chatmem.store.images import data_urls
from chatmem.store.sessions import Handle


def _refs(messages: Any) -> list[str]:
    found: list[str] = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            for part in content:
                url = part.get("image_url", {}).get("url", "") if isinstance(part, dict) else ""
                if isinstance(url, str) and url.startswith(IMAGE_REF):
                    found.append(url[len(IMAGE_REF) :])
    return found


def inline_images(session: Handle, plan: Any) -> Any:
    """``plan`` with every image reference replaced by the image's data URL (the plan itself
    when it sends no image).  A reference whose file is gone becomes a short text part."""
    refs = _refs(plan.messages)
    if not refs:
        return plan
    urls = data_urls(session, refs)

    def part_of(part: Any) -> Any:
        url = part.get("image_url", {}).get("url", "") if isinstance(part, dict) else ""
        if not (isinstance(url, str) and url.startswith(IMAGE_REF)):
            return part
        file_id = url[len(IMAGE_REF) :]
        if file_id not in urls:
            return {"type": "text", "text": "[image no longer stored]"}
        return {**part, "image_url": {**part["image_url"], "url": urls[file_id]}}

    messages = tuple(
        {**m, "content": [part_of(p) for p in m["content"]]}
        if isinstance(m.get("content"), list)
        else m
        for m in plan.messages
    )
    return replace(plan, messages=messages)
