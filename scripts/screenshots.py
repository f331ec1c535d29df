"""Regenerate the chat's screenshots in both themes from a seeded server.

    PYTHONPATH=src python scripts/screenshots.py   # docs/screenshots/chat-*.png, memory-*.png

It starts the fake OpenAI-compatible model server (tests/support/model_server.py) and a real
``chatmem serve`` on a temporary state directory (tests/ui/harness.py), seeds a conversation
whose early messages are summarised (a real compaction, the summary written by the fake
model) and whose last answer has a table and code, then takes the chat page with Chromium
(/usr/bin/chromium) in the light and the dark theme: ``chat-light.png``, ``chat-dark.png``;
then the memory window open over that chat (its stacked bar, the threshold of auto-compression,
the table as its legend): ``memory-light.png``, ``memory-dark.png``.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.support and tests.ui.harness

from playwright.sync_api import expect, sync_playwright  # noqa: E402
from tests.support.model_server import FakeModelServer  # noqa: E402
from tests.ui.harness import (  # noqa: E402
    CHROMIUM,
    CHROMIUM_ARGS,
    PASSWORD,
    Server,
    make_conversation,
    make_profile,
    start_server,
)

OUT = ROOT / "docs" / "screenshots"
VIEWPORT = {"width": 1280, "height": 960}

QUESTION = "Compare the three caching options for the API and show a minimal example."
ANSWER = """Here is how the three options compare for the read-heavy endpoints:

| Option | Latency | Invalidation | Best for |
|---|---|---|---|
| In-process LRU | ~0.1 ms | per worker | hot, small keys |
| Redis | ~0.5 ms | shared, by key | most endpoints |
| HTTP `Cache-Control` | 0 ms (client) | by TTL only | public, static data |

Redis is the safe default: every worker sees the same entries and an update can drop a key at
once. A minimal read-through cache:

```python
import json
import redis

cache = redis.Redis()


def profile(user_id: str) -> dict:
    key = f"profile:{user_id}"
    if (hit := cache.get(key)) is not None:
        return json.loads(hit)
    value = load_profile(user_id)  # the database
    cache.set(key, json.dumps(value), ex=300)
    return value
```

Keep the TTL short (five minutes here) and delete the key when the profile changes."""

SUMMARY = (
    "Goal: speed up the API's read-heavy endpoints. Decided: measure first (p95 is 180 ms on "
    "/profiles), keep PostgreSQL as the source of truth, no new services without a reason. "
    "Open: which cache to use."
)


def seed(server: Server, model: FakeModelServer) -> dict[str, Any]:
    server.add_user("alice")
    with server.api("alice") as api:
        profile = make_profile(api, model.base_url, "GPT-4o mini", context_window=16384)
        c = make_conversation(api, profile["id"], pairs=4, title="Caching for the API")
        model.reply(SUMMARY)
        compacted = api.post(f"/api/v1/conversations/{c['id']}/compact", json={})
        compacted.raise_for_status()
        for role, text in (("user", QUESTION), ("assistant", ANSWER)):
            r = api.post(
                f"/api/v1/conversations/{c['id']}/messages", json={"role": role, "content": text}
            )
            r.raise_for_status()
        return dict(c)


def shoot(server: Server, conversation: dict[str, Any]) -> list[Path]:
    written = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            for scheme in ("light", "dark"):
                context = browser.new_context(viewport=VIEWPORT, color_scheme=scheme)
                page = context.new_page()
                page.goto(server.url + "/")
                page.get_by_label("Name").fill("alice")
                page.get_by_label("Password").fill(PASSWORD)
                page.get_by_role("button", name="Sign in").click()
                page.wait_for_selector("#draft")
                page.goto(server.url + "/c/" + conversation["id"])
                expect(page.locator("#chat-title")).to_have_text(conversation["title"])
                expect(page.locator("#counter-text")).not_to_have_text("–")
                expect(page.locator(".compaction-marker")).to_be_visible()
                expect(page.locator(".md table")).to_be_visible()
                # The summary's marker at the top, then the question and its answer.
                page.evaluate(
                    "document.querySelector('.compaction-marker').scrollIntoView({block: 'start'})"
                )
                page.locator("#draft").blur()
                page.mouse.move(0, 0)
                path = OUT / f"chat-{scheme}.png"
                page.screenshot(path=str(path))
                written.append(path)
                # The memory window over the same chat: its bar, the threshold, the legend.
                page.locator("#counter").click()
                dialog = page.locator("#memory-window")
                expect(dialog).to_be_visible()
                expect(dialog.locator("#mw-segments .seg")).to_have_count(10)
                expect(dialog.locator("#mw-bar-threshold")).to_be_visible()
                expect(dialog.locator("#mw-breakdown tr[data-key='summary'] td")).not_to_have_text(
                    "0"
                )
                page.mouse.move(0, 0)
                path = OUT / f"memory-{scheme}.png"
                page.screenshot(path=str(path))
                written.append(path)
                context.close()
        finally:
            browser.close()
    return written


def main() -> None:
    if not CHROMIUM.exists():
        sys.exit(f"Chromium is needed at {CHROMIUM}")
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as state, FakeModelServer() as model:
        server = start_server(Path(state) / "state")
        try:
            conversation = seed(server, model)
            for path in shoot(server, conversation):
                print(path.relative_to(ROOT))
        finally:
            server.stop()


if __name__ == "__main__":
    main()
