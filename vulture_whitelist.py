"""Names vulture cannot see used: called by a framework, read by name, or kept for tests.

``make lint`` runs ``vulture src vulture_whitelist.py --min-confidence 60`` (60 is the level
of unused functions, classes, methods, attributes and variables; higher levels report only
unused imports, arguments and unreachable code).  Decorated FastAPI routes, Typer commands,
exception handlers and SQLAlchemy event listeners are skipped by ``ignore_decorators`` in
``[tool.vulture]`` (pyproject.toml).  Add a name here only with the reason it is used.
"""

from vulture.whitelist_utils import Whitelist

_ = Whitelist()

# Alembic reads these from every revision module (store/migrations/versions).
_.revision
_.down_revision
_.branch_labels
_.depends_on
_.upgrade
_.downgrade

# Pydantic and pydantic-settings: configuration and request fields (read by model_dump).
_.model_config
_.bearer_token

# SQLAlchemy TypeDecorator hooks (store/types.UTCDateTime).
_.impl
_.cache_ok
_.process_bind_param
_.process_result_value

# Columns written by keyword or read by name (getattr(row, column_for(tokenizer)) …).
_.tokens_o200k
_.tokens_cl100k
_.heartbeat_at  # runs: written with every heartbeat, for operators (TURN-3)
_.opened_at  # app_workspaces: when the workspace was opened, for operators (APPS-4)
_.last_used_at  # api_tokens: never written yet; dropping it needs a migration

# io.RawIOBase (store/exchange/source), httpcore's network backend and pool (models/ssrf,
# turns/tools), Starlette's StreamingResponse (web/sse), anyio's thread limiter (web/app).
_.readable
_.readinto
_.connect_unix_socket
_._pool
_.stream_response
_.total_tokens
_.redirect_slashes  # read by Starlette's Router per request (web/slashes turns it off)

# Interfaces and public fields: the engine's duck-typed history protocol, a collected
# answer's finish reason (clients and tests read it).
_.CountedHistory
_.finish_reason

# Seams and probes that tests and bench/ use: the resolver tests inject (models/ssrf), the
# schema revision (store/db), the loader's page counter (store/engine), every table module
# for the migration check (store/tables), the archiver's step hooks a crash test stops at.
_.StaticResolver
_.current_revision
_.pages_loaded
_.load_all
_.ARCHIVE_STEPS
_.RESTORE_STEPS
_.DELETE_STEPS

# turns/service: the MCP sync task is kept referenced so it is not collected mid-run.
_._mcp_sync


# i18n (PROJ-4): read by templates/base.html (the page's catalog for static/i18n.js).
_.js_catalog

# store/search (issue 16): one conversation's messages by text, for the recall tool (issue 17)
# and tests; the conversation list uses the same indexes through search_condition.
_.search_messages

# store/mcp_tools.save_known_tools writes it by name (Core update), for people reading the table.
_.tools_listed_at

# A conversation's history keys by kind: read by the tests of the history index (API-1).
_.conversation_keys

# bench/memory_quality.py measures the fact guard cold (CTX-24).
