"""API-1 (issue 29, part 1): an OpenAI client that names no conversation and resends its
whole history continues the conversation it repeats (the history index); a client may name
its own conversation keys; ``store: false`` answers without storing anything.

Driven by the real clients — the ``openai`` SDK, LangChain's ``ChatOpenAI`` and LlamaIndex's
``OpenAILike`` — against a real ``chatmem serve`` and the fake provider."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import openai
import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from llama_index.core.llms import ChatMessage
from llama_index.llms.openai_like import OpenAILike
from sqlalchemy import func, select
from tests.support.model_server import DEFAULT_REPLY, FakeModelServer
from tests.support.openai_world import OpenAIWorld, fresh, serve
from tests.support.serve import ServeProcess

from chatmem.store.db import Database
from chatmem.store.tables.accounts import User
from chatmem.store.tables.conversations import Conversation, Message
from chatmem.store.tables.runs import Run, UsageRow

pytestmark = pytest.mark.slow

HEADER = "X-Chatmem-Conversation"
TURNS = 50


class World(OpenAIWorld):
    def __init__(self, server: ServeProcess, model: FakeModelServer) -> None:
        super().__init__(server, model)
        self.root = server.signed_in("root", admin=True)
        self._users = 0

    def user(self, *, paid: bool = False) -> httpx.Client:
        """A new user with a profile ``fake`` (paid: $1 per million tokens each way)."""
        self._users += 1
        api = self.server.signed_in(f"user{self._users}")
        prices = {"input_price_per_mtok": 1.0, "output_price_per_mtok": 1.0} if paid else {}
        self.add_profile(api, "fake", model="m", free=not paid, **prices)
        return api

    def conversations(self, api: httpx.Client) -> list[dict[str, Any]]:
        response = api.get("/api/v1/conversations")
        assert response.status_code == 200, response.text
        return list(response.json()["items"])

    def stored(self, api: httpx.Client, conversation_id: str) -> list[tuple[str, str]]:
        response = api.get(f"/api/v1/conversations/{conversation_id}/messages")
        assert response.status_code == 200, response.text
        body = response.json()
        items = body["items"] if isinstance(body, dict) else body
        return [(m["role"], m["content"]) for m in items]

    def user_id(self, api: httpx.Client) -> str:
        me = api.get("/api/v1/me")
        assert me.status_code == 200, me.text
        return str(me.json()["id"])

    def counts(self, user_id: str) -> dict[str, int]:
        """What the database holds of the user's: conversations, messages, runs, ledger rows."""
        db = Database(self.server.database_url)
        try:
            with db.session() as session:
                conversations = select(Conversation.id).where(Conversation.user_id == user_id)
                return {
                    "conversations": session.scalar(
                        select(func.count()).select_from(conversations.subquery())
                    )
                    or 0,
                    "messages": session.scalar(
                        select(func.count())
                        .select_from(Message)
                        .where(Message.conversation_id.in_(conversations))
                    )
                    or 0,
                    "runs": session.scalar(
                        select(func.count()).select_from(Run).where(Run.user_id == user_id)
                    )
                    or 0,
                    "ledger": session.scalar(
                        select(func.count())
                        .select_from(UsageRow)
                        .where(UsageRow.user_id == user_id)
                    )
                    or 0,
                    "users": session.scalar(select(func.count()).select_from(User)) or 0,
                }
        finally:
            db.dispose()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    yield from serve(tmp_path_factory, "serve-openai-continue", World)


@pytest.fixture
def w(world: World) -> Iterator[World]:
    yield from fresh(world)


def _fifty_turns(w: World, api: httpx.Client, ask: Callable[[list[tuple[str, str]]], str]) -> None:
    """``ask(history)`` sends the whole history (no header) and answers the reply's text;
    after 50 turns the user has one conversation holding each message once, in order."""
    history: list[tuple[str, str]] = [("system", "Be brief.")]
    for turn in range(TURNS):
        w.model.reply(f"Answer {turn}.")
        history.append(("user", f"Question {turn}?"))
        answer = ask(history)
        assert answer == f"Answer {turn}."
        history.append(("assistant", answer))
    (conversation,) = w.conversations(api)
    assert w.stored(api, conversation["id"]) == history
    # The provider got chatmem's plan of that one conversation: the history once, in order.
    sent = w.model.chat_requests[-1].body["messages"]
    assert [m["content"] for m in sent if m["role"] == "user"] == [
        f"Question {t}?" for t in range(TURNS)
    ]


def test_the_sdk_resending_its_history_leaves_one_conversation(w: World) -> None:
    api = w.user()
    client = w.sdk(api)

    def ask(history: list[tuple[str, str]]) -> str:
        messages: Any = [{"role": role, "content": text} for role, text in history]
        if len(history) % 4 == 0:  # every other turn streamed
            stream = client.chat.completions.create(model="fake", messages=messages, stream=True)
            return "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
        answer = client.chat.completions.create(model="fake", messages=messages)
        return answer.choices[0].message.content or ""

    _fifty_turns(w, api, ask)


def test_langchain_resending_its_history_leaves_one_conversation(w: World) -> None:
    api = w.user()
    llm = ChatOpenAI(
        model="fake", base_url=w.server.url + "/v1", api_key=w.token(api), max_retries=0
    )
    kinds: dict[str, type[BaseMessage]] = {
        "system": SystemMessage,
        "user": HumanMessage,
        "assistant": AIMessage,
    }

    def ask(history: list[tuple[str, str]]) -> str:
        reply = llm.invoke([kinds[role](content=text) for role, text in history])
        return str(reply.content)

    _fifty_turns(w, api, ask)


def test_llamaindex_resending_its_history_leaves_one_conversation(w: World) -> None:
    api = w.user()
    llm = OpenAILike(
        model="fake",
        api_base=w.server.url + "/v1",
        api_key=w.token(api),
        is_chat_model=True,
        max_retries=0,
    )

    def ask(history: list[tuple[str, str]]) -> str:
        reply = llm.chat([ChatMessage(role=role, content=text) for role, text in history])
        return str(reply.message.content)

    _fifty_turns(w, api, ask)


def test_two_chats_with_the_same_first_message_stay_apart(w: World) -> None:
    """Two chats of one user begin alike (same question, same answer): while they are alike
    either may continue either copy, the most recently active; once they differ each
    continues its own."""
    api = w.user()
    client = w.sdk(api)

    def send(*texts: str) -> str:
        roles = ["user", "assistant"] * len(texts)
        messages: Any = [{"role": r, "content": t} for r, t in zip(roles, texts, strict=False)]
        raw = client.chat.completions.with_raw_response.create(model="fake", messages=messages)
        return str(raw.headers[HEADER])

    first, second = send("Hi"), send("Hi")
    assert first != second  # one user message: a new chat each time
    a = send("Hi", DEFAULT_REPLY, "About cats?")
    b = send("Hi", DEFAULT_REPLY, "About dogs?")
    assert {a, b} == {first, second}
    assert send("Hi", DEFAULT_REPLY, "About cats?", DEFAULT_REPLY, "More cats.") == a
    assert send("Hi", DEFAULT_REPLY, "About dogs?", DEFAULT_REPLY, "More dogs.") == b
    assert [t for _, t in w.stored(api, a)][2::2] == ["About cats?", "More cats."]
    assert [t for _, t in w.stored(api, b)][2::2] == ["About dogs?", "More dogs."]
    assert len(w.conversations(api)) == 2


def test_a_client_chosen_key_creates_and_continues_its_conversation(w: World) -> None:
    """API-1: a key chatmem did not issue — in the header, ``metadata.conversation_id`` or
    ``user: "conversation:…"`` — names a conversation of the user's own; a plain ``user``
    (a user's name, as Open WebUI and LibreChat send) names none."""
    api = w.user()
    client = w.sdk(api)
    question: Any = [{"role": "user", "content": "Remember 7."}]
    raw = client.chat.completions.with_raw_response.create(
        model="fake", messages=question, extra_headers={HEADER: "chat-42"}
    )
    assert raw.headers[HEADER] == "chat-42"
    # Only the new message, by metadata: the same conversation.
    raw = client.chat.completions.with_raw_response.create(
        model="fake",
        messages=[{"role": "user", "content": "And 8."}],
        metadata={"conversation_id": "chat-42"},
    )
    assert raw.headers[HEADER] == "chat-42"
    # By ``user``, with the whole history.
    history: Any = [
        *question,
        {"role": "assistant", "content": DEFAULT_REPLY},
        {"role": "user", "content": "And 8."},
        {"role": "assistant", "content": DEFAULT_REPLY},
        {"role": "user", "content": "Sum?"},
    ]
    raw = client.chat.completions.with_raw_response.create(
        model="fake", messages=history, user="conversation:chat-42"
    )
    assert raw.headers[HEADER] == "chat-42"
    (conversation,) = w.conversations(api)
    assert [t for r, t in w.stored(api, conversation["id"]) if r == "user"] == [
        "Remember 7.",
        "And 8.",
        "Sum?",
    ]
    # A user's name in ``user`` is no conversation key: a new chat.
    raw = client.chat.completions.with_raw_response.create(
        model="fake", messages=[{"role": "user", "content": "Hello"}], user="chat-42"
    )
    assert raw.headers[HEADER] not in ("chat-42", conversation["id"])
    assert len(w.conversations(api)) == 2


def test_another_users_same_key_is_another_conversation(w: World) -> None:
    ann, bob = w.user(), w.user()
    for api, text in ((ann, "Ann's secret."), (bob, "Bob's note.")):
        raw = w.sdk(api).chat.completions.with_raw_response.create(
            model="fake",
            messages=[{"role": "user", "content": text}],
            extra_headers={HEADER: "shared-key"},
        )
        assert raw.headers[HEADER] == "shared-key"
    (anns,), (bobs,) = w.conversations(ann), w.conversations(bob)
    assert anns["id"] != bobs["id"]
    assert w.stored(ann, anns["id"]) == [("user", "Ann's secret."), ("assistant", DEFAULT_REPLY)]
    assert w.stored(bob, bobs["id"]) == [("user", "Bob's note."), ("assistant", DEFAULT_REPLY)]
    # Ann's conversation by its id is not found for Bob (STORE-1), and nothing is stored.
    with pytest.raises(openai.NotFoundError):
        w.sdk(bob).chat.completions.create(
            model="fake",
            messages=[{"role": "user", "content": "Let me in."}],
            extra_headers={HEADER: anns["id"]},
        )
    assert w.stored(ann, anns["id"]) == [("user", "Ann's secret."), ("assistant", DEFAULT_REPLY)]
    assert len(w.conversations(bob)) == 1


def test_a_stale_index_entry_never_continues_the_wrong_conversation(w: World) -> None:
    """The conversation changed in the UI (its answer regenerated): the client still holds
    the old answer, so its history repeats no stored view — a new conversation holds it;
    the history with the version shown continues the conversation."""
    api = w.user()
    client = w.sdk(api)
    w.model.reply("Blue.")
    raw = client.chat.completions.with_raw_response.create(
        model="fake", messages=[{"role": "user", "content": "Pick a colour."}]
    )
    conversation_id = raw.headers[HEADER]
    asked = api.get(f"/api/v1/conversations/{conversation_id}/messages").json()["items"][0]
    w.model.reply("Green.")
    redo = api.post(f"/api/v1/conversations/{conversation_id}/messages/{asked['id']}/regenerate")
    assert redo.status_code == 202, redo.text
    with api.stream("GET", f"/api/v1/runs/{redo.json()['run_id']}/events") as events:
        assert any(line.startswith("event: done") for line in events.iter_lines())

    def send(answer: str, question: str) -> str:
        messages: Any = [
            {"role": "user", "content": "Pick a colour."},
            {"role": "assistant", "content": answer},
            {"role": "user", "content": question},
        ]
        raw = client.chat.completions.with_raw_response.create(model="fake", messages=messages)
        return str(raw.headers[HEADER])

    stale = send("Blue.", "Why blue?")
    assert stale != conversation_id
    assert [t for _, t in w.stored(api, stale)] == [
        "Pick a colour.",
        "Blue.",
        "Why blue?",
        DEFAULT_REPLY,
    ]
    assert send("Green.", "Why green?") == conversation_id
    assert [t for _, t in w.stored(api, conversation_id)] == [
        "Pick a colour.",
        "Green.",
        "Why green?",
        DEFAULT_REPLY,
    ]


def test_a_failed_answer_is_retried_in_its_conversation(w: World) -> None:
    """The client got an error: it sends the same request again, and that conversation
    answers it (the failed answer is not part of what the client saw)."""
    api = w.user()
    client = w.sdk(api)
    first: Any = [{"role": "user", "content": "One?"}]
    conversation_id = client.chat.completions.with_raw_response.create(
        model="fake", messages=first
    ).headers[HEADER]
    history: Any = [*first, {"role": "assistant", "content": DEFAULT_REPLY}]
    history.append({"role": "user", "content": "Two?"})
    w.model.error(401)
    with pytest.raises(openai.APIStatusError):
        client.chat.completions.create(model="fake", messages=history)
    w.model.reset()
    raw = client.chat.completions.with_raw_response.create(model="fake", messages=history)
    assert raw.headers[HEADER] == conversation_id
    assert [t for r, t in w.stored(api, conversation_id) if r == "user"] == ["One?", "Two?"]
    assert len(w.conversations(api)) == 1


def test_store_false_leaves_nothing_but_the_ledger(w: World) -> None:
    """A title request (``store: false``), streamed and not: answered, nothing of it stored
    — no conversation, message or run — and its cost in the usage ledger."""
    api = w.user(paid=True)
    user_id = w.user_id(api)
    client = w.sdk(api)
    prompt: Any = [{"role": "user", "content": "Title for: a chat about cats"}]
    w.model.reply("Cats", usage=(1000, 10))
    raw = client.chat.completions.with_raw_response.create(
        model="fake", messages=prompt, store=False
    )
    assert HEADER not in raw.headers and "x-chatmem-run-id" not in raw.headers
    answer = raw.parse()
    assert answer.choices[0].message.content == "Cats"
    assert answer.usage is not None and answer.usage.prompt_tokens == 1000
    w.model.reply("Feline chat", usage=(2000, 20))
    stream = client.chat.completions.create(
        model="fake",
        messages=prompt,
        store=False,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == ("Feline chat")
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 20
    # The provider got the client's messages as given.
    assert w.model.chat_requests[-1].body["messages"] == prompt
    counts = w.counts(user_id)
    assert (counts["conversations"], counts["messages"], counts["runs"]) == (0, 0, 0)
    assert counts["ledger"] == 2
    assert w.conversations(api) == []
    usage = api.get("/api/v1/usage").json()
    assert usage["total"] == pytest.approx((1000 + 10 + 2000 + 20) / 1e6)


def test_store_false_is_under_the_users_limits(w: World) -> None:
    api = w.user(paid=True)
    user_id = w.user_id(api)
    limited = w.root.patch(f"/api/v1/admin/users/{user_id}", json={"session_limit_usd": 0.0005})
    assert limited.status_code == 200, limited.text
    client = w.sdk(api)
    prompt: Any = [{"role": "user", "content": "Tags for: cats"}]
    w.model.reply("cats", usage=(1000, 10))
    client.chat.completions.create(model="fake", messages=prompt, store=False)
    with pytest.raises(openai.RateLimitError) as refused:
        client.chat.completions.create(model="fake", messages=prompt, store=False)
    assert refused.value.code == "insufficient_quota"
    assert len(w.model.chat_requests) == 1  # the refused one never reached the provider
    assert w.counts(user_id)["ledger"] == 1


def test_an_agent_loop_with_client_tools_stays_in_one_conversation(w: World) -> None:
    """LangChain with tools and no header: the tool call, its result sent back, the answer
    and the next question all land in the one conversation."""

    @tool
    def local_time(city: str) -> str:
        """The local time in a city."""
        return "12:00"

    api = w.user()
    llm = ChatOpenAI(
        model="fake", base_url=w.server.url + "/v1", api_key=w.token(api), max_retries=0
    ).bind_tools([local_time])
    history: list[Any] = [HumanMessage("Time in Oslo?")]
    for turn in range(3):
        w.model.tool_call("local_time", {"city": "Oslo"}, id=f"call_{turn}")
        asked = llm.invoke(history)
        assert isinstance(asked, AIMessage) and asked.tool_calls
        result = local_time.invoke(asked.tool_calls[0]["args"])
        history += [asked, ToolMessage(result, tool_call_id=f"call_{turn}")]
        w.model.reply(f"It is noon ({turn}).")
        history.append(llm.invoke(history))
        history.append(HumanMessage(f"And now ({turn})?"))
    (conversation,) = w.conversations(api)
    roles = [r for r, _ in w.stored(api, conversation["id"])]
    assert roles == ["user", "assistant", "tool", "assistant"] * 3
