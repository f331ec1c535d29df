"""MCP Apps (APPS-1): what a tool's ``_meta.ui`` declares.

A tool has an app when its ``_meta.ui.resourceUri`` (older servers: ``_meta["ui/resourceUri"]``)
names a ``ui://`` resource (of type :data:`APP_MIME_TYPE`).  Its ``_meta.ui.visibility`` says
who may call it: ``"model"`` (offered to the model), ``"app"`` (callable by an app of its own
server); absent, both.  A tool the model may not see is never offered to it
(:func:`~chatmem.tools.toolbox.offered`).  chatmem's MCP client advertises the extension
(:data:`EXTENSION_ID`), so servers that send their UI only to hosts that render it do.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: The MIME type of an app resource (hosts render nothing else).
APP_MIME_TYPE = "text/html;profile=mcp-app"
#: The extension chatmem's MCP client advertises (SEP-2133), with the types it renders.
EXTENSION_ID = "io.modelcontextprotocol/ui"
VISIBILITIES = ("model", "app")
MAX_URI_CHARS = 1000


@dataclass(frozen=True, slots=True)
class ToolApp:
    """A tool's app: its ``ui://`` resource and who may call the tool."""

    resource_uri: str
    visibility: tuple[str, ...] = VISIBILITIES

    @property
    def for_model(self) -> bool:
        return "model" in self.visibility

    def to_json(self) -> dict[str, Any]:
        return {"resource_uri": self.resource_uri, "visibility": list(self.visibility)}

    @classmethod
    def parse(cls, value: Any) -> ToolApp | None:
        """From :meth:`to_json` (a stored list); None for anything else."""
        if not isinstance(value, Mapping):
            return None
        return _app(value.get("resource_uri"), value.get("visibility"))


def _app(uri: Any, visibility: Any) -> ToolApp | None:
    if not isinstance(uri, str) or not uri.startswith("ui://") or len(uri) > MAX_URI_CHARS:
        return None
    if not isinstance(visibility, list | tuple):
        return ToolApp(uri)
    return ToolApp(uri, tuple(v for v in VISIBILITIES if v in visibility))


def tool_app(meta: Any) -> ToolApp | None:
    """The app a tool's ``_meta`` declares, or None (no app, or not a ``ui://`` URI)."""
    if not isinstance(meta, Mapping):
        return None
    ui = meta.get("ui")
    if isinstance(ui, Mapping) and "resourceUri" in ui:
        return _app(ui.get("resourceUri"), ui.get("visibility"))
    legacy = meta.get("ui/resourceUri")
    visibility = ui.get("visibility") if isinstance(ui, Mapping) else None
    return _app(legacy, visibility)


def app_of(tool: Any) -> ToolApp | None:
    """The app of a listed tool: an SDK ``Tool`` (its ``meta``) or a known one (its ``app``)."""
    if hasattr(tool, "app"):
        app = tool.app
        return app if isinstance(app, ToolApp) else None
    return tool_app(getattr(tool, "meta", None))
