"""What the admin console shows (USE-5): accounts with their limits, and the audit trail."""

from __future__ import annotations

from typing import Any

from chatmem.store.accounts import UserRecord
from chatmem.store.admin import ActionRecord
from chatmem.store.types import iso


def user_admin_view(user: UserRecord) -> dict[str, Any]:
    """An account as administrators see it: never its password, nor whether it has one."""
    return {
        "id": user.id,
        "name": user.name,
        "is_admin": user.is_admin,
        "disabled": user.disabled,
        "session_limit_usd": user.session_limit_usd,
        "week_limit_usd": user.week_limit_usd,
        "created_at": iso(user.created_at),
    }


def action_view(row: ActionRecord) -> dict[str, Any]:
    """One entry of the audit trail."""
    return {
        "id": row.id,
        "admin_id": row.admin_id,
        "admin_name": row.admin_name,
        "action": row.action,
        "target_type": row.target_type,
        "target_id": row.target_id,
        "details": row.details,
        "created_at": iso(row.created_at),
    }
