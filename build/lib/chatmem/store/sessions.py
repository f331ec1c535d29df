"""The database handles the rooms above ``store`` hold without importing SQLAlchemy.

A unit of work hands its callers a :class:`Session` (the ORM unit, one transaction) or a
Core :class:`Connection`; code outside ``store/`` only passes them on to ``store``
functions and names them in annotations.  Statements are written in ``store/`` alone.
"""

from __future__ import annotations

from sqlalchemy import Connection
from sqlalchemy.orm import Session

#: Either handle: what ``store`` functions that run one statement accept.
Handle = Session | Connection

__all__ = ["Connection", "Handle", "Session"]
