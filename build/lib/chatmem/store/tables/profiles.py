"""Model profiles (PROF-1) and MCP servers (TURN-4): the rows that hold encrypted secrets.

Secrets are AES-GCM ciphertexts bound to their row (``chatmem.security.secret_box``): an API key
copied onto another profile's row does not decrypt.  A profile belongs to its creator
(``user_id``); an admin's profile with ``shared`` set is visible to everyone.  ``user_id`` is
nullable so a shared profile survives its creator's account.  ``summarizer_profile_id`` is a
plain column (a profile may name any profile visible to its owner; deletion clears it).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Boolean, Float, ForeignKey, Integer, LargeBinary, String, Text, true
from sqlalchemy.orm import Mapped, mapped_column

from chatmem.store.base import Base
from chatmem.store.types import UTCDateTime, new_id, utcnow

CONTEXT_WINDOW_MIN = 8_192
CONTEXT_WINDOW_MAX = 1_000_000
CONTEXT_WINDOW_DEFAULT = 32_768
TOKENIZERS = ("estimate", "o200k_base", "cl100k_base")


class ModelProfile(Base):
    __tablename__ = "profiles"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    user_id: Mapped[str | None] = mapped_column(
        ForeignKey("users.id", ondelete="SET NULL"), nullable=True, index=True
    )
    shared: Mapped[bool] = mapped_column(Boolean, default=False)
    name: Mapped[str] = mapped_column(String(200))
    base_url: Mapped[str] = mapped_column(Text)
    model: Mapped[str] = mapped_column(String(200))
    api_key_ciphertext: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    context_window: Mapped[int] = mapped_column(Integer, default=CONTEXT_WINDOW_DEFAULT)
    # NULL: the default for the window (``chatmem.context.values.default_answer_reserve``).
    answer_reserve: Mapped[int | None] = mapped_column(Integer, nullable=True)
    tokenizer: Mapped[str] = mapped_column(String(20), default="estimate")
    input_price_per_mtok: Mapped[float | None] = mapped_column(Float, nullable=True)
    output_price_per_mtok: Mapped[float | None] = mapped_column(Float, nullable=True)
    free: Mapped[bool] = mapped_column(Boolean, default=False)
    stateless: Mapped[bool] = mapped_column(Boolean, default=False)
    # PROJ-2: the model takes image input (a question's images are sent as image parts).
    accepts_images: Mapped[bool] = mapped_column(Boolean, default=False)
    # PROJ-2: flat tokens per image; NULL: the provider's formula (OpenAI's tiles, else a
    # conservative flat cost: ``chatmem.context.images``).
    image_tokens: Mapped[int | None] = mapped_column(Integer, nullable=True)
    summarizer_profile_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    # Memory knobs (CTX-22); NULL means the engine's default.
    economy_pairs: Mapped[int | None] = mapped_column(Integer, nullable=True)
    economy_batch: Mapped[int | None] = mapped_column(Integer, nullable=True)
    full_threshold_fraction: Mapped[float | None] = mapped_column(Float, nullable=True)
    full_threshold_cap: Mapped[int | None] = mapped_column(Integer, nullable=True)
    full_keep_messages: Mapped[int | None] = mapped_column(Integer, nullable=True)
    window_messages: Mapped[int | None] = mapped_column(Integer, nullable=True)
    window_chars: Mapped[int | None] = mapped_column(Integer, nullable=True)
    instructions_role: Mapped[str | None] = mapped_column(String(16), nullable=True)
    # Issue 17: the ``recall`` tool for this profile's conversations; NULL: the mode's default.
    recall: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    #: USE-4: the "Auto" choice's order among shared profiles (1 is tried first; NULL: Auto
    #: never picks it).  An administrator's setting.
    auto_rank: Mapped[int | None] = mapped_column(Integer, nullable=True)
    #: Issue 29: request parameters (``temperature`` …) sent when the client sent none, and
    #: ones sent whatever it sent (``chatmem.models.request_options``); NULL: none.
    request_defaults: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    request_pins: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)


class McpServer(Base):
    """An MCP server configured by an administrator.  Headers (e.g. a bearer token) are one
    encrypted JSON object, never returned by the API."""

    __tablename__ = "mcp_servers"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    url: Mapped[str] = mapped_column(Text)
    headers_ciphertext: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    #: PROV-3: seconds to connect and list the tools, and for one call (NULL: the setting).
    connect_timeout: Mapped[float | None] = mapped_column(Float, nullable=True)
    call_timeout: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: PROV-6: the tool names offered (NULL: all), and those the user approves first.
    allowed_tools: Mapped[list[str] | None] = mapped_column(JSON, nullable=True)
    ask_first_tools: Mapped[list[str] | None] = mapped_column(JSON, nullable=True)
    #: Seed 003: the tools the server last listed (name, description, input schema each),
    #: so every plan counts them from the start, and when it was last listed (NULL: never).
    known_tools: Mapped[list[dict[str, object]] | None] = mapped_column(JSON, nullable=True)
    tools_listed_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    #: APPS-1: the server's tools show their apps in the feed (the switch "show apps").
    show_apps: Mapped[bool] = mapped_column(Boolean, default=True, server_default=true())
    #: APPS-4: the tool "Open Live Workspace" calls (one with an app), NULL: none.
    workspace_tool: Mapped[str | None] = mapped_column(String(300), nullable=True)
    #: APPS-2: the browser permissions (``camera`` …) its apps may have when they ask.
    app_permissions: Mapped[list[str] | None] = mapped_column(JSON, nullable=True)
