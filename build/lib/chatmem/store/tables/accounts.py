"""Accounts: users, API tokens, browser sessions and one-time sign-in links.

Secrets are never stored: tokens, session ids and link tokens are kept as SHA-256 hex digests
(they are long random strings, so a fast hash is enough); passwords as argon2 hashes.
``evicted_*`` count what storage quotas removed for the user (STORE-4: never silent).
``disabled`` (USE-5): an administrator switched the account off — it cannot sign in and its
sessions and tokens stop working; ``session_limit_usd`` / ``week_limit_usd`` are its own
included usage (NULL: the deployment's settings).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, Float, ForeignKey, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from chatmem.store.base import Base
from chatmem.store.types import UTCDateTime, new_id, utcnow


class User(Base):
    __tablename__ = "users"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    password_hash: Mapped[str | None] = mapped_column(Text, nullable=True)
    is_admin: Mapped[bool] = mapped_column(Boolean, default=False)
    evicted_conversations: Mapped[int] = mapped_column(Integer, default=0)
    evicted_messages: Mapped[int] = mapped_column(Integer, default=0)
    #: The interface language the user chose (PROJ-4); NULL: the browser's.
    locale: Mapped[str | None] = mapped_column(String(16), nullable=True)
    #: The colour theme the user chose ("light", "dark"); NULL: the system's.
    theme: Mapped[str | None] = mapped_column(String(16), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    disabled: Mapped[bool] = mapped_column(Boolean, default=False)
    session_limit_usd: Mapped[float | None] = mapped_column(Float, nullable=True)
    week_limit_usd: Mapped[float | None] = mapped_column(Float, nullable=True)


class ApiToken(Base):
    __tablename__ = "api_tokens"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    label: Mapped[str] = mapped_column(String(200), default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    last_used_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class BrowserSession(Base):
    __tablename__ = "browser_sessions"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    csrf_token: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)


class SigninLink(Base):
    __tablename__ = "signin_links"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)
    used_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
