"""chatmem: a self-hosted chat server whose edge is visible, predictable conversation memory.

Rooms (each a subpackage, each depending only on the ones listed before it):

- ``chatmem.context`` — the pure context engine (no I/O, imports nothing else of chatmem).
- ``chatmem.store`` — SQLAlchemy models, migrations, repositories, archive, export/import.
- ``chatmem.models`` — model profiles, encrypted secrets, the SSRF-safe model client.
- ``chatmem.turns`` — durable background turns, run events, MCP tools.
- ``chatmem.web`` — the FastAPI app: JSON API routers and the browser UI.
- ``chatmem.cli`` — the ``chatmem`` command.
"""

__version__ = "0.2.0"
