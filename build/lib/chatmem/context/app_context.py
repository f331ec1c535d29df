"""APPS-3: an MCP App's model context (``ui/update-model-context``) as the model is sent it.

The app gives MCP content blocks and, optionally, ``structuredContent``.  The model is sent
one message in the instructions' role, right after the instructions, that says which app it
comes from (the tool whose app it is, and its server) so the model never takes it for the
user's words:

* ``text`` blocks verbatim; an embedded ``resource`` with text as its text under its URI;
* other blocks (images, audio, binary resources, links) as a one-line placeholder naming
  their type (the bytes are never sent, as PROV-4 for attachments);
* ``structuredContent`` as compact JSON with sorted keys (the same object, the same text).

The text is a pure function of its inputs, so its count (cached when stored, CTX-2) matches
what is sent.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

HEADER = (
    "Context from the app of the tool “{tool}”{server}, as the app last updated it "
    "(shown to the user in the conversation; not the user's own words):"
)


def _block_text(block: Mapping[str, Any]) -> str:
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind == "resource":
        resource = block.get("resource")
        if isinstance(resource, Mapping) and isinstance(resource.get("text"), str):
            return f"[resource {resource.get('uri', '')}]\n{resource['text']}"
    if kind == "resource_link":
        return f"[link {block.get('uri', '')}]"
    return f"[{kind or 'unknown'} content not shown]"


def render_app_context(
    tool: str,
    server: str | None,
    content: Sequence[Mapping[str, Any]],
    structured: Mapping[str, Any] | None,
) -> str:
    """The message text the model is sent for an app's context (see the module's rules)."""
    parts = [HEADER.format(tool=tool, server=f" (MCP server “{server}”)" if server else "")]
    parts.extend(_block_text(block) for block in content)
    if structured is not None:
        dumped = json.dumps(structured, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
        parts.append(f"structuredContent: {dumped}")
    return "\n\n".join(parts)
