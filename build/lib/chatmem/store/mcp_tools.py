"""Each MCP server's last known tool list, kept with the server's record (seed 003).

A plan counts the tool definitions a turn will offer; after a restart no session has listed
them yet, and "none" would make a plan say *fits* where the real request may not.  So the
list a server last gave is stored on its row whenever it is listed (a new list at once, the same one
confirmed now and then), and read back with the enabled servers.  The
values are plain JSON — ``{"name", "description", "input_schema"}`` — written as given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import update
from sqlalchemy.orm import Session

from chatmem.store.tables.profiles import McpServer


def save_known_tools(
    session: Session, server_id: str, tools: Sequence[Mapping[str, Any]], listed_at: datetime
) -> bool:
    """Stores the list the server just gave; False when the server is gone (deleted)."""
    result = session.execute(
        update(McpServer)
        .where(McpServer.id == server_id)
        .values(known_tools=[dict(tool) for tool in tools], tools_listed_at=listed_at)
        .execution_options(synchronize_session=False)
    )
    return bool(getattr(result, "rowcount", 0))
