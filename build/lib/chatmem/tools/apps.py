"""MCP Apps (APPS-1, APPS-2): what a tool's and a resource's ``_meta.ui`` declare.

A tool has an app when its ``_meta.ui.resourceUri`` (older servers: ``_meta["ui/resourceUri"]``)
names a ``ui://`` resource (of type :data:`APP_MIME_TYPE`).  Its ``_meta.ui.visibility`` says
who may call it: ``"model"`` (offered to the model), ``"app"`` (callable by an app of its own
server); absent, both.  A tool the model may not see is never offered to it
(:func:`~chatmem.tools.toolbox.offered`); a tool whose visibility leaves out apps is
refused to them (:func:`app_refusal`).  chatmem's MCP client advertises the extension
(:data:`EXTENSION_ID`), so servers that send their UI only to hosts that render it do.

The resource declares in its own ``_meta.ui`` the domains its content-security policy
admits (``csp``: connect, resource, frame and base-URI domains — default none), the browser
permissions it asks for (``permissions``) and whether it prefers a border
(``prefersBorder``).  :func:`resource_ui` reads them, bounded: a server cannot make chatmem
keep more than :data:`MAX_DOMAINS` domains of :data:`MAX_DOMAIN_CHARS` characters.  A
permission is granted only when the resource asks for it *and* the administrator allowed it
for the server (:meth:`ResourceUi.granted`; none by default, APPS-2).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

#: The MIME type of an app resource (hosts render nothing else).
APP_MIME_TYPE = "text/html;profile=mcp-app"
#: The extension chatmem's MCP client advertises (SEP-2133), with the types it renders.
EXTENSION_ID = "io.modelcontextprotocol/ui"
VISIBILITIES = ("model", "app")
#: The browser permissions an app may ask for (``_meta.ui.permissions``), by their JSON name
#: in chatmem's API and in the spec.
PERMISSIONS = {
    "camera": "camera",
    "microphone": "microphone",
    "geolocation": "geolocation",
    "clipboard_write": "clipboardWrite",
}
CSP_FIELDS = {
    "connect_domains": "connectDomains",
    "resource_domains": "resourceDomains",
    "frame_domains": "frameDomains",
    "base_uri_domains": "baseUriDomains",
}
MAX_DOMAINS = 32
MAX_DOMAIN_CHARS = 255
MAX_URI_CHARS = 1000


@dataclass(frozen=True, slots=True)
class ToolApp:
    """A tool's app: its ``ui://`` resource and who may call the tool."""

    resource_uri: str
    visibility: tuple[str, ...] = VISIBILITIES

    @property
    def for_model(self) -> bool:
        return "model" in self.visibility

    @property
    def for_app(self) -> bool:
        return "app" in self.visibility

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


def app_refusal(app: ToolApp | None, *, offered: bool, known: bool = True) -> str | None:
    """Why an app may not call a tool of its server (None: it may), APPS-3: the tool must be
    one the server lists (``known``), the server's allow-list must offer it (``offered``:
    PROV-6, the say the model's calls obey), and its visibility must include apps."""
    if not known:
        return "This is not a tool of the app's MCP server."
    if not offered:
        return "The administrator does not allow this tool."
    if app is not None and not app.for_app:
        return "This tool is not callable by an app."
    return None


@dataclass(frozen=True, slots=True)
class ResourceUi:
    """What an app resource declares in its ``_meta.ui`` (bounded, well-typed)."""

    csp: Mapping[str, tuple[str, ...]]
    permissions: frozenset[str]
    prefers_border: bool | None

    def csp_json(self) -> dict[str, list[str]]:
        return {name: list(self.csp.get(name, ())) for name in CSP_FIELDS}

    def to_json(self) -> dict[str, Any]:
        return {
            "csp": self.csp_json(),
            "permissions": sorted(self.permissions),
            "prefers_border": self.prefers_border,
        }

    @classmethod
    def parse(cls, value: Any) -> ResourceUi:
        """From :meth:`to_json` (the stored cache entry)."""
        if not isinstance(value, Mapping):
            return NO_UI
        csp = _mapping(value.get("csp"))
        permissions = value.get("permissions")
        border = value.get("prefers_border")
        return cls(
            {name: _domains(csp.get(name)) for name in CSP_FIELDS},
            frozenset(p for p in permissions or () if p in PERMISSIONS)
            if isinstance(permissions, list)
            else frozenset(),
            border if isinstance(border, bool) else None,
        )

    def granted(self, allowed: Collection[str]) -> dict[str, bool]:
        """Each permission: asked for by the resource and allowed by the administrator."""
        return {name: name in self.permissions and name in allowed for name in PERMISSIONS}


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _domains(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list | tuple):
        return ()
    kept = [v for v in value if isinstance(v, str) and 0 < len(v) <= MAX_DOMAIN_CHARS]
    return tuple(dict.fromkeys(kept))[:MAX_DOMAINS]


NO_UI = ResourceUi({name: () for name in CSP_FIELDS}, frozenset(), None)


def resource_ui(meta: Any) -> ResourceUi:
    """What a resource's ``_meta`` declares (``_meta.ui``); nothing declared is nothing."""
    ui = meta.get("ui") if isinstance(meta, Mapping) else None
    if not isinstance(ui, Mapping):
        return NO_UI
    csp, asked = _mapping(ui.get("csp")), _mapping(ui.get("permissions"))
    border = ui.get("prefersBorder")
    return ResourceUi(
        {name: _domains(csp.get(wire)) for name, wire in CSP_FIELDS.items()},
        frozenset(name for name, wire in PERMISSIONS.items() if wire in asked),
        border if isinstance(border, bool) else None,
    )


def is_app_mime(mime: Any) -> bool:
    """``text/html;profile=mcp-app``, however spaced or cased."""
    if not isinstance(mime, str):
        return False
    parts = [p.strip().lower() for p in mime.split(";")]
    return parts[0] == "text/html" and "profile=mcp-app" in parts[1:]


#: The largest app document chatmem keeps and serves (bytes of UTF-8 HTML).
MAX_HTML_BYTES = 2 * 1024 * 1024
TOO_LARGE = f"the app is larger than the {MAX_HTML_BYTES // (1024 * 1024)} MB chatmem shows"


@dataclass(frozen=True, slots=True)
class AppDocument:
    """An app resource as read: its HTML (None when it is not one chatmem shows — ``problem``
    says why), what it declares, and its size in bytes."""

    html: str | None
    ui: ResourceUi
    size: int
    problem: str | None = None


def app_document(result: Any, uri: str) -> AppDocument:
    """The app's HTML from a ``resources/read`` result (the item for ``uri``, else the
    first): text or base64 blob, of the MCP Apps type, at most :data:`MAX_HTML_BYTES`."""
    contents = list(getattr(result, "contents", None) or ())
    item = next((c for c in contents if str(getattr(c, "uri", "")) == uri), None)
    if item is None and contents:
        item = contents[0]
    if item is None:
        return AppDocument(None, NO_UI, 0, "the MCP server sent no content for the app")
    ui = resource_ui(getattr(item, "meta", None))
    text, blob = getattr(item, "text", None), getattr(item, "blob", None)
    if isinstance(text, str):
        data = text.encode("utf-8")
    elif isinstance(blob, str):
        try:
            data = base64.b64decode(blob, validate=True)
        except (binascii.Error, ValueError):
            return AppDocument(None, ui, 0, "the MCP server sent an app that is not valid base64")
    else:
        return AppDocument(None, ui, 0, "the MCP server sent no content for the app")
    if not is_app_mime(getattr(item, "mime_type", None)):
        return AppDocument(None, ui, len(data), f"the MCP server's resource is not {APP_MIME_TYPE}")
    if len(data) > MAX_HTML_BYTES:
        return AppDocument(None, ui, len(data), TOO_LARGE)
    try:
        return AppDocument(data.decode("utf-8"), ui, len(data))
    except UnicodeDecodeError:
        return AppDocument(None, ui, len(data), "the MCP server sent an app that is not UTF-8")
