"""Request dependencies for the model rooms: the secret box and the endpoint policy.

Both are built once at start-up (``create_app`` / its lifespan) and live on ``app.state``:
``app.state.secrets`` (a :class:`~chatmem.security.secret_box.SecretBox`) and
``app.state.endpoint_policy`` (an :class:`~chatmem.security.endpoints.EndpointPolicy`; tests may
replace it with one using a ``StaticResolver``).
"""

from __future__ import annotations

from typing import Annotated, cast

from fastapi import Depends, Request

from chatmem.security.endpoints import EndpointPolicy
from chatmem.security.secret_box import SecretBox


def get_secrets(request: Request) -> SecretBox:
    return cast(SecretBox, request.app.state.secrets)


def get_endpoint_policy(request: Request) -> EndpointPolicy:
    return cast(EndpointPolicy, request.app.state.endpoint_policy)


SecretsDep = Annotated[SecretBox, Depends(get_secrets)]
EndpointPolicyDep = Annotated[EndpointPolicy, Depends(get_endpoint_policy)]
