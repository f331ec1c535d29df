"""Typed settings, read from ``CHATMEM_*`` environment variables (and optionally a TOML file).

One :class:`Settings` object is built at the edge (CLI or test) and passed in; nothing in
chatmem reads the environment at import time.  Every field carries help text, and a test
checks that every field is documented (docs/reference/settings.md, generated from this
class by docs/gen_reference.py).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


def default_state_dir() -> Path:
    """The per-user data folder of the XDG base directory rules: ``$XDG_DATA_HOME/chatmem``,
    else ``~/.local/share/chatmem``."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "chatmem"


class Settings(BaseSettings):
    """Deployment configuration.  Environment variable = ``CHATMEM_`` + field name, upper case."""

    model_config = SettingsConfigDict(env_prefix="CHATMEM_", extra="ignore")

    state_dir: Path = Field(
        default_factory=lambda: default_state_dir(),
        description="Where SQLite, the key file and archives live. Default: the per-user data "
        "folder (`$XDG_DATA_HOME/chatmem`, else `~/.local/share/chatmem`); `make run` uses "
        "`./.chatmem`.",
    )
    database_url: str | None = Field(
        default=None,
        description="SQLAlchemy URL (sqlite:///… or postgresql://…). Default: SQLite in the state dir.",
    )
    redis_url: str | None = Field(
        default=None,
        description="Redis URL; enables cross-replica coordination (run events, stop signals, locks).",
    )
    replica_heartbeat: float = Field(
        default=5.0,
        gt=0,
        le=60,
        description="Seconds between a replica's heartbeats; a replica silent for three is dead "
        "and its runs are marked interrupted by the others.",
    )
    encryption_key: str | None = Field(
        default=None,
        description="Shared 32-byte URL-safe base64 key for API keys. Default: a key file in the state dir.",
    )
    allow_private_endpoints: bool = Field(
        default=False,
        description="1 lets profiles and MCP servers use http, private and loopback endpoints.",
    )
    allowed_endpoints: str = Field(
        default="",
        description="Comma-separated host:port pairs admitted although private (trusted internal gateways).",
    )
    host: str = Field(default="127.0.0.1", description="Listen address.")
    port: int = Field(default=8000, description="Listen port.")
    public_url: str | None = Field(
        default=None,
        description="Base URL printed in sign-in links. Default: http://HOST:PORT.",
    )
    quota: Literal["off", "extension"] = Field(
        default="off",
        description="Storage quota preset: off, or extension (50 folders, 200 conversations, 300 messages).",
    )
    max_folders: int | None = Field(
        default=None, description="Folder quota per user (overrides the preset)."
    )
    max_conversations: int | None = Field(
        default=None, description="Conversation quota per user (overrides the preset)."
    )
    max_messages: int | None = Field(
        default=None, description="Message quota per conversation (overrides the preset)."
    )
    max_body_bytes: int = Field(
        default=8 * 1024 * 1024,
        description="Largest accepted request body (JSON or an uploaded file; imports have "
        "their own bound), in bytes.",
    )
    max_json_depth: int = Field(
        default=64,
        ge=2,
        le=1000,
        description="Deepest JSON nesting accepted in a request body or an import file (SEC-1).",
    )
    max_string_bytes: int = Field(
        default=32 * 1024 * 1024,
        ge=1024,
        description="Longest JSON string accepted in a request body or an import file, in bytes "
        "as sent (SEC-1).",
    )
    max_json_items: int = Field(
        default=100_000,
        ge=10,
        description="Most items in one JSON list (or members in one object) of a request body "
        "(SEC-1).",
    )
    max_import_conversation_bytes: int = Field(
        default=256 * 1024 * 1024,
        ge=1024,
        description="Largest single conversation in an import file, in bytes as sent: the "
        "import holds one conversation in memory at a time (SEC-1).",
    )
    archive_storage: Literal["auto", "file", "database"] = Field(
        default="auto",
        description=(
            "Where archived conversations (.json.zst) live: file (STATE_DIR/archive, must be a "
            "shared volume for replicas), database (a blob row), or auto (database on "
            "PostgreSQL, file on SQLite)."
        ),
    )
    max_image_bytes: int = Field(
        default=5 * 1024 * 1024,
        ge=1024,
        description="Largest image accepted as an attachment (PNG, JPEG, GIF, WebP), in bytes.",
    )
    max_projects: int | None = Field(
        default=None,
        ge=1,
        description="Most projects a user may keep (unset: no limit; the extension preset: 50).",
    )
    max_import_bytes: int = Field(
        default=1024 * 1024 * 1024,
        description="Largest accepted upload for POST /api/v1/import, in bytes.",
    )
    upload_timeout_seconds: float = Field(
        default=60.0,
        gt=0,
        description="Seconds an upload (an import, a conversation's or a project's file) may "
        "take to arrive whole; a slower one is refused with 408 request_timeout.",
    )
    turn_max_iterations: int = Field(
        default=8, description="Per-turn guard: most model requests in one turn."
    )
    turn_max_tool_calls: int = Field(
        default=16, description="Per-turn guard: most tool calls in one turn."
    )
    usage_session_limit: float | None = Field(
        default=None,
        description="Included usage per rolling session window, in USD (unset: unlimited).",
    )
    usage_week_limit: float | None = Field(
        default=None, description="Included usage per rolling 7 days, in USD (unset: unlimited)."
    )
    usage_session_hours: float = Field(
        default=5.0,
        description="Length of the rolling session window for included usage, in hours.",
    )
    usage_fallback_profile_id: str | None = Field(
        default=None,
        description="Profile id answered with when a user's included usage is used up (USE-3).",
    )
    usage_extension_requests: bool = Field(
        default=True, description="Let users ask the administrators for more usage (USE-3)."
    )
    model_timeout: float = Field(
        default=120.0, description="Seconds before a model request times out."
    )
    mcp_connect_timeout: float = Field(
        default=10.0,
        gt=0,
        description="Seconds an MCP server has to connect and list its tools (PROV-3); a "
        "server's own setting overrides it.",
    )
    mcp_call_timeout: float = Field(
        default=120.0,
        gt=0,
        description="Seconds one MCP tool call may take before its result counts as unknown "
        "(PROV-3); a server's own setting overrides it.",
    )
    mcp_first_wait: float = Field(
        default=0.2,
        ge=0,
        description="Seconds a turn waits for an MCP server still on its very first "
        "connection (once; a hung server is then skipped until it answers).",
    )
    mcp_refresh_interval: float = Field(
        default=60.0,
        gt=0,
        description="Seconds between two listings of an MCP server's tools in the background.",
    )
    app_calls_per_minute: int = Field(
        default=60,
        ge=1,
        le=100_000,
        description="Calls an MCP App may make through chatmem (tools/call, resources/read) "
        "per conversation and minute (APPS-3); past it they are refused with rate_limited.",
    )
    tool_approval_timeout: float = Field(
        default=900.0,
        gt=0,
        description="Seconds an 'ask first' tool call waits for the user's answer before it "
        "counts as refused (PROV-6).",
    )
    max_answer_bytes: int = Field(
        default=4 * 1024 * 1024,
        ge=1024,
        description=(
            "Largest model answer or tool result, in bytes (UTF-8): past it the answer's stream "
            "is stopped with answer_too_large and what arrived up to the bound is kept; a tool "
            "result is cut at the bound."
        ),
    )
    secure_cookies: bool = Field(
        default=False,
        description="Mark the session cookie Secure (set behind HTTPS); also sends "
        "Strict-Transport-Security.",
    )
    log_level: str = Field(default="INFO", description="Logging level.")
    log_format: Literal["text", "json"] = Field(
        default="text",
        description="Log lines: `text` (readable) or `json` (one JSON object a line, with "
        "`request_id` where a request caused it).",
    )
    metrics_token: str | None = Field(
        default=None,
        description="A token that may read `/metrics` (`Authorization: Bearer …`) besides "
        "administrators' — for a Prometheus scraper.",
    )
    signin_failures_per_name: int = Field(
        default=5,
        ge=1,
        description="Failed sign-ins a user name gets before each further one doubles the wait "
        "(SEC-2: 429 rate_limited with Retry-After, from 1 s).",
    )
    signin_failures_per_address: int = Field(
        default=20,
        ge=1,
        description="Failed sign-ins a client address (an IPv6 /64) gets, over all names, before "
        "each further one doubles the wait (SEC-2).",
    )
    signin_max_delay: float = Field(
        default=900.0,
        gt=0,
        description="Longest sign-in back-off, in seconds (SEC-2); counts are forgotten after "
        "an hour without a failure.",
    )
    trusted_proxies: str = Field(
        default="",
        description="Comma-separated addresses or networks of reverse proxies (* for any) "
        "whose X-Forwarded-For names the client (sign-in throttling) and whose "
        "X-Forwarded-Proto names the scheme (https behind a TLS proxy: redirects, app frames). "
        "Empty: both headers are ignored; the connection's address and scheme count (OPS-4).",
    )

    def sqlalchemy_url(self) -> str:
        """The database URL, defaulting to SQLite inside the state directory."""
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.state_dir / 'chatmem.db').resolve()}"

    def base_url(self) -> str:
        return (self.public_url or f"http://{self.host}:{self.port}").rstrip("/")
