"""The pages' static files: their URLs (stamped, so a release is never served stale) and the
integrity of the MCP Apps bridge, the one script a page adds by itself (``static/apps.js``)."""

from __future__ import annotations

import base64
import functools
import hashlib
from pathlib import Path

STATIC_DIR = Path(__file__).resolve().parent.parent / "static"
#: The vendored host bridge of MCP Apps (``static/vendor/SOURCES.md``).
APP_BRIDGE = "vendor/ext-apps-app-bridge-2.0.4.js"


def static_url(name: str) -> str:
    """``/static/name?v=…`` so a new release is never served a stale cached script."""
    from chatmem import __version__

    path = STATIC_DIR / name
    stamp = int(path.stat().st_mtime) if path.exists() else 0
    return f"/static/{name}?v={__version__}.{stamp}"


@functools.cache
def app_bridge_integrity() -> str:
    """The bridge's Subresource Integrity value (``sha384-…``), from the file as served."""
    digest = hashlib.sha384((STATIC_DIR / APP_BRIDGE).read_bytes()).digest()
    return "sha384-" + base64.b64encode(digest).decode("ascii")
