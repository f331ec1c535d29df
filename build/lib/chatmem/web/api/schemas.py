"""Request bodies and query values shared by the API's routes, and the signed-in user's JSON.

Bodies are strict (``extra="forbid"``, no type coercion): a wrong type or an unknown field is
``invalid_input`` rather than a guess.  Responses use snake_case, string ids and ISO-8601 UTC
times with ``Z``; the JSON of each stored record is built in ``web/views``.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from chatmem.bounds import MAX_INT
from chatmem.store.accounts import Account
from chatmem.store.types import INTEGER_MAX, iso


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


def _whole_text(value: Any) -> Any:
    """A query value is text: ``5`` is a whole number, ``5.0`` or ``1e3`` is not."""
    if isinstance(value, str) and not re.fullmatch(r"[+-]?[0-9]+", value.strip()):
        raise ValueError("Input should be a whole number")
    return value


#: Marks a query or header integer as whole-number text; bounds go *before* it
#: (``Annotated[int, Field(ge=1, le=500), Whole]``), so /openapi.json states them as JSON
#: Schema's ``minimum``/``maximum`` — after it, pydantic writes keys no client knows
#: (``ge``/``le``), and the fuzzer never tries a column's edge.
Whole = BeforeValidator(_whole_text)

#: A whole-number query parameter, as strict as a body's integers (the fuzzer checks it).
WholeNumber = Annotated[int, Whole]

#: A sequence number a client pages or resumes from — a message's place in its conversation
#: (``?after_seq=``) or an event's in its run (``?after=``, ``Last-Event-ID``).  Both columns
#: are ``Integer``, 32 bits on PostgreSQL, which refuses a larger value in the statement
#: itself (a 500): the range is checked here, the same on every backend.
Seq = Annotated[int, Field(ge=0, le=INTEGER_MAX), Whole]
#: A row offset: PostgreSQL's OFFSET and SQLite's take 64 bits.
Offset = Annotated[int, Field(ge=0, le=MAX_INT), Whole]


def user_public(user: Account) -> dict[str, Any]:
    return {
        "id": user.id,
        "name": user.name,
        "is_admin": user.is_admin,
        "created_at": iso(user.created_at),
        "evicted": evicted_public(user),
        "locale": user.locale,
        "theme": user.theme or "system",
    }


def evicted_public(user: Account) -> dict[str, int]:
    return {"conversations": user.evicted_conversations, "messages": user.evicted_messages}
