"""``/api/v1/profiles``: model profiles (PROF-1 … PROF-4).

``api_key`` is write-only: responses carry ``has_api_key``.  The base URL is checked with the
endpoint policy on every save (``endpoint_not_allowed``, 400).  ``POST …/{id}/test`` checks
the URL, key and model by asking the model API for its model list (falling back to a one-token
completion for APIs without ``/models``) and answers ``{"ok": …}`` — a failing provider is a
result of the test, not an error of the request.

The memory knobs (CTX-22) are optional: left out, or null, they follow the engine's defaults
(an explicit null in a PATCH returns a knob, or the answer reserve, to its default).  Their
ranges come from the profiles room (:data:`chatmem.models.profiles.KNOB_RANGES`), which checks
them again on save — with the answer reserve against the window as it will be.
"""

from __future__ import annotations

import time
from typing import Annotated, Any, Literal

import anyio.from_thread
from fastapi import APIRouter, Response
from pydantic import Field

from chatmem.context.prices import MAX_PRICE_PER_MTOK
from chatmem.context.values import InstructionsRole
from chatmem.errors import EndpointNotAllowed, ProviderError
from chatmem.models import profiles as repo
from chatmem.models.client import ModelClient, RetryPolicy
from chatmem.store import admin as audit
from chatmem.store import profiles as profile_store
from chatmem.store.profiles import ProfileRecord, visible_profiles
from chatmem.store.tables.profiles import (
    CONTEXT_WINDOW_DEFAULT,
    CONTEXT_WINDOW_MAX,
    CONTEXT_WINDOW_MIN,
)
from chatmem.web.api.schemas import Body
from chatmem.web.deps import CurrentUser, DbSession, SettingsDep
from chatmem.web.model_deps import EndpointPolicyDep, SecretsDep
from chatmem.web.views.profiles import profile_view

router = APIRouter(prefix="/api/v1/profiles", tags=["profiles"])

Window = Annotated[int, Field(ge=CONTEXT_WINDOW_MIN, le=CONTEXT_WINDOW_MAX)]
Price = Annotated[float, Field(ge=0, le=MAX_PRICE_PER_MTOK, allow_inf_nan=False)]
Tokenizer = Literal["estimate", "o200k_base", "cl100k_base"]
Text = Annotated[str, Field(min_length=1, max_length=200)]
Url = Annotated[str, Field(min_length=1, max_length=2048)]
Key = Annotated[str, Field(max_length=4096)]
Reserve = Annotated[int, Field(ge=0, le=CONTEXT_WINDOW_MAX // 2)]
AutoRank = Annotated[int, Field(ge=1, le=1000)]  # as the admin console's (USE-4)
#: Checked by the profiles room (``chatmem.models.request_options``): one set of rules.
RequestOptions = dict[str, Any]


def _range(name: str) -> Any:
    """The knob's bounds as the profiles room states them (CTX-22)."""
    low, high = repo.KNOB_RANGES[name]
    return (
        Field(ge=low, le=high, allow_inf_nan=False)
        if isinstance(low, float)
        else Field(ge=low, le=high)
    )


EconomyPairs = Annotated[int, _range("economy_pairs")]
EconomyBatch = Annotated[int, _range("economy_batch")]
ThresholdFraction = Annotated[float, _range("full_threshold_fraction")]
ThresholdCap = Annotated[int, _range("full_threshold_cap")]
KeepMessages = Annotated[int, _range("full_keep_messages")]
WindowMessages = Annotated[int, _range("window_messages")]
WindowChars = Annotated[int, _range("window_chars")]
ImageTokens = Annotated[int, _range("image_tokens")]


class MemoryKnobs(Body):
    """CTX-22, in both bodies: absent or null is the engine's default."""

    answer_reserve: Reserve | None = None  # None: the window's default
    economy_pairs: EconomyPairs | None = None
    economy_batch: EconomyBatch | None = None
    full_threshold_fraction: ThresholdFraction | None = None
    full_threshold_cap: ThresholdCap | None = None
    full_keep_messages: KeepMessages | None = None
    window_messages: WindowMessages | None = None
    window_chars: WindowChars | None = None
    instructions_role: InstructionsRole | None = None
    #: PROJ-2: flat tokens per image; null: the provider's formula (OpenAI's tile formula for
    #: OpenAI models, else 1,600).
    image_tokens: ImageTokens | None = None
    #: Issue 29 (docs/openai-parameters.md): request parameters (``temperature``,
    #: ``max_tokens`` …) sent when the client sent none, and ones sent whatever it sent;
    #: checked by the rules of ``/v1/chat/completions``; null or ``{}``: none.
    request_defaults: RequestOptions | None = None
    request_pins: RequestOptions | None = None


class ProfileCreate(MemoryKnobs):
    name: Text
    base_url: Url
    model: Text
    api_key: Key | None = None
    context_window: Window = CONTEXT_WINDOW_DEFAULT
    tokenizer: Tokenizer = "estimate"
    input_price_per_mtok: Price | None = None
    output_price_per_mtok: Price | None = None
    free: bool = False
    stateless: bool = False
    #: PROJ-2, PROV-4: the model takes image input (images are sent as image parts).
    accepts_images: bool = False
    summarizer_profile_id: str | None = None
    shared: bool = False
    #: Issue 17: the recall tool; null: on in the economy and full modes.
    recall: bool | None = None
    #: USE-4: this profile's place in Auto's order (1 first); null: not ranked.
    auto_rank: AutoRank | None = None


class ProfileUpdate(MemoryKnobs):
    """Only the fields sent change; ``api_key: null`` removes the key, a knob's null returns
    it to the default."""

    name: Text | None = None
    base_url: Url | None = None
    model: Text | None = None
    api_key: Key | None = None
    context_window: Window | None = None
    tokenizer: Tokenizer | None = None
    input_price_per_mtok: Price | None = None
    output_price_per_mtok: Price | None = None
    free: bool | None = None
    stateless: bool | None = None
    accepts_images: bool | None = None
    summarizer_profile_id: str | None = None
    shared: bool | None = None
    #: Issue 17: true / false, or null for the memory mode's default.
    recall: bool | None = None
    #: USE-4: this profile's place in Auto's order (1 first); null: not ranked (the user's
    #: own unranked profiles follow, the one used last first).
    auto_rank: AutoRank | None = None


# Fields where an explicit null means "clear"; for the others null means "unchanged".
_NULLABLE = {
    "api_key",
    "input_price_per_mtok",
    "output_price_per_mtok",
    "summarizer_profile_id",
    "answer_reserve",
    "recall",
    "auto_rank",
    *repo.KNOBS,
    *repo.REQUEST_OPTION_FIELDS,
}


@router.get("")
def list_profiles(user: CurrentUser, session: DbSession) -> dict[str, Any]:
    return {"items": [profile_view(p, user) for p in visible_profiles(session, user.id)]}


@router.post("", status_code=201)
def create_profile(
    body: ProfileCreate,
    user: CurrentUser,
    session: DbSession,
    secrets: SecretsDep,
    policy: EndpointPolicyDep,
) -> dict[str, Any]:
    row = repo.create_profile(session, user, secrets, policy, body.model_dump())
    if row.shared:
        _audit(session, user, "add_shared_profile", row, body.model_fields_set)
    return profile_view(row, user)


@router.get("/{profile_id}")
def read_profile(profile_id: str, user: CurrentUser, session: DbSession) -> dict[str, Any]:
    return profile_view(repo.visible_profile(session, user, profile_id), user)


@router.patch("/{profile_id}")
def change_profile(
    profile_id: str,
    body: ProfileUpdate,
    user: CurrentUser,
    session: DbSession,
    secrets: SecretsDep,
    policy: EndpointPolicyDep,
) -> dict[str, Any]:
    row = repo.editable_profile(session, user, profile_id)
    changes = {
        name: getattr(body, name)
        for name in body.model_fields_set
        if getattr(body, name) is not None or name in _NULLABLE
    }
    changed = repo.update_profile(session, user, row, secrets, policy, changes)
    if row.shared or changed.shared:
        _audit(session, user, "update_shared_profile", changed, set(changes))
    return profile_view(changed, user)


@router.delete("/{profile_id}", status_code=204)
def delete_profile(profile_id: str, user: CurrentUser, session: DbSession) -> Response:
    row = repo.editable_profile(session, user, profile_id)
    if row.shared:
        _audit(session, user, "delete_shared_profile", row, set())
    profile_store.delete_profile(session, row.id)
    return Response(status_code=204)


def _audit(
    session: DbSession, user: CurrentUser, action: str, row: ProfileRecord, fields: set[str]
) -> None:
    """USE-5: an administrator's change to a shared profile, in the audit trail (the names
    of the fields set, never the key)."""
    audit.record(
        session, user, action, "profile", row.id, {"name": row.name, "fields": sorted(fields)}
    )


@router.post("/{profile_id}/test")
def test_profile(
    profile_id: str,
    user: CurrentUser,
    session: DbSession,
    secrets: SecretsDep,
    policy: EndpointPolicyDep,
    settings: SettingsDep,
) -> dict[str, Any]:
    """Test the connection: reachable, key accepted, model known."""
    row = repo.visible_profile(session, user, profile_id)
    endpoint = repo.model_endpoint(row, secrets, conceal=not repo.can_edit(row, user))
    if endpoint.conceal:  # SEC-4: somebody else's shared profile: no host in refusals
        policy = policy.concealed()
    policy.check_url(endpoint.base_url)  # refuse before connecting, with the policy's reason

    async def probe() -> dict[str, Any]:
        started = time.monotonic()
        async with ModelClient(
            endpoint,
            policy,
            timeout=min(settings.model_timeout, 30.0),
            retry=RetryPolicy(attempts=1),
        ) as client:
            try:
                models = await client.list_models()
                listed: bool | None = endpoint.model in models
            except ProviderError as exc:
                if getattr(exc, "data", {}).get("status") not in (404, 405):
                    raise
                # No /models on this API: a one-token completion proves URL, key and model.
                await client.complete([{"role": "user", "content": "ping"}], max_tokens=1)
                listed = None
        return {
            "ok": True,
            "model_listed": listed,
            "latency_ms": round((time.monotonic() - started) * 1000),
        }

    try:
        return anyio.from_thread.run(probe)
    except EndpointNotAllowed:
        raise
    except ProviderError as exc:
        return {"ok": False, "error": {"code": exc.code, "message": exc.message}}
