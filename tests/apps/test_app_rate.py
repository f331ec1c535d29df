"""APPS-3: a flooding app is refused with ``rate_limited`` and costs the chat nothing."""

from __future__ import annotations

import pytest
from tests.apps.conftest import AppChat
from tests.apps.test_app_calls import tools_call
from tests.apps.test_app_view import called

from chatmem.errors import RateLimited
from chatmem.settings import Settings
from chatmem.tools.app_host import CallRate


@pytest.fixture
def turn_settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"allow_private_endpoints": True, "app_calls_per_minute": 3})


def test_an_apps_calls_are_bounded_per_conversation_APPS_3(app_chat: AppChat) -> None:
    weather = called(app_chat, "get_weather")
    for _ in range(3):
        response = tools_call(app_chat, weather, name="refresh_weather", arguments={"city": "x"})
        assert response.status_code == 200, response.text
    response = tools_call(app_chat, weather, name="refresh_weather", arguments={"city": "x"})
    assert response.status_code == 429
    assert response.json()["error"]["code"] == "rate_limited"
    assert 1 <= int(response.headers["Retry-After"]) <= 60
    # The chat goes on: the next turn is answered.
    app_chat.model.reply("Still here.")
    assert app_chat.turn("Are you there?")["status"] == "completed"


def test_the_rate_is_a_sliding_minute_per_conversation_APPS_3() -> None:
    now = [1000.0]
    rate = CallRate(2, clock=lambda: now[0])
    rate.take("a")
    rate.take("a")
    rate.take("b")  # another conversation counts on its own
    with pytest.raises(RateLimited) as refused:
        rate.take("a")
    assert refused.value.data["retry_after"] == 60
    now[0] += 30
    with pytest.raises(RateLimited) as refused:
        rate.take("a")
    assert refused.value.data["retry_after"] == 30
    now[0] += 30.5  # the first two are more than a minute old
    rate.take("a")
    rate.take("a")
