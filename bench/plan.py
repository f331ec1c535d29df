"""Benchmark of the context engine (issue 2): planning cost vs LangChain's trim_messages.

* A 10,000-message conversation (mixed lengths, some tool calls) with cached token counts is
  planned in ``full`` and ``window`` mode; on the same messages in the same run,
  ``langchain_core.messages.trim_messages`` (strategy "last", the same token budget, its
  approximate counter) trims them.  Medians are printed and the line
  ``plan vs trim_messages: <ratio>x`` (bar: >= 30x, measured against the slower plan mode).
* Plan time at 1,000, 10,000 and 100,000 messages (bar: the 100,000 figure <= 2x the 1,000
  one).  These histories have no summary yet, so every plan also prices the whole fold the
  next request needs (CTX-21): the history answers ``tokens_between`` from sums it holds, as
  the server's loader answers it with one indexed SUM (``CountedMessages``, built once, like
  the cached counts).  The same plan over a plain list, which the engine must walk, is printed
  beside it.
* A fold of a 10,000-message backlog (no summary, full mode, 32K window) driven to its end
  with a stub summariser: its rounds and its time (the engine's side of a fold; the model
  calls are the rest).
* Token counting throughput in MB/s for ``estimate`` and ``o200k_base``.
Exit status 1 when a bar is missed.
"""

from __future__ import annotations

import random
import statistics
import sys
import time
from collections.abc import Callable

from chatmem.context import (
    Conversation,
    Message,
    Profile,
    ToolCall,
    count_message,
    get_tokenizer,
    plan,
)
from chatmem.context.folding import fold, run_fold
from chatmem.context.history import CountedMessages

WORDS = [
    "the",
    "memory",
    "of",
    "a",
    "conversation",
    "keeps",
    "every",
    "message",
    "whole",
    "and",
    "decides",
    "what",
    "the",
    "model",
    "sees",
    "budget",
    "window",
    "summary",
    "request",
    "answer",
    "reserve",
    "token",
    "price",
    "file",
    "tool",
    "result",
    "question",
]
PROFILE = Profile()  # the default profile: 32,768-token window, 4,096 answer reserve


def make_messages(count: int, seed: int = 7) -> list[Message]:
    rng = random.Random(seed)
    tok = get_tokenizer("estimate")
    out: list[Message] = []
    i = 0
    while len(out) < count:
        text = " ".join(rng.choices(WORDS, k=rng.choice((5, 20, 60, 200, 600))))
        out.append(Message(f"m{i}", "user", text))
        i += 1
        if rng.random() < 0.15:  # some turns call a tool
            call = ToolCall(f"c{i}", "search", '{"q": "memory"}')
            out.append(Message(f"m{i}", "assistant", "", tool_calls=(call,)))
            i += 1
            result = " ".join(rng.choices(WORDS, k=rng.choice((50, 300))))
            out.append(Message(f"m{i}", "tool", result, tool_call_id=call.id))
            i += 1
        text = " ".join(rng.choices(WORDS, k=rng.choice((10, 40, 150, 400))))
        out.append(Message(f"m{i}", "assistant", text))
        i += 1
    out = out[:count]
    # cached counts, as storage hands them in (CTX-2)
    return [
        Message(
            m.id, m.role, m.content, count_message(m, tok), m.excluded, m.tool_calls, m.tool_call_id
        )
        for m in out
    ]


def median_seconds(fn: Callable[[], object], repeat: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def to_langchain(messages: list[Message]) -> list[object]:
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    out: list[object] = []
    for m in messages:
        if m.role == "user":
            out.append(HumanMessage(content=m.content, id=m.id))
        elif m.role == "tool":
            out.append(ToolMessage(content=m.content, tool_call_id=m.tool_call_id or "", id=m.id))
        else:
            calls = [{"id": c.id, "name": c.name, "args": {"q": "memory"}} for c in m.tool_calls]
            out.append(AIMessage(content=m.content, tool_calls=calls, id=m.id))
    return out


def counted(messages: list[Message]) -> CountedMessages:
    tok = get_tokenizer("estimate")
    return CountedMessages(messages, lambda m: count_message(m, tok))


def main() -> int:
    ok = True
    messages = make_messages(10_000)
    conversation = Conversation(messages=counted(messages))
    budget = PROFILE.context_window - PROFILE.answer_reserve
    results = {}
    for mode in ("full", "window"):
        results[mode] = median_seconds(
            lambda mode=mode: plan(conversation, PROFILE, mode=mode), repeat=50
        )
        print(f"plan {mode:6} 10,000 messages: median {results[mode] * 1e3:.3f} ms")
    try:
        from langchain_core.messages import trim_messages
    except ImportError:
        print("langchain-core is not installed (pip install -e '.[bench]')")
        return 1
    lc_messages = to_langchain(messages)
    trim = median_seconds(
        lambda: trim_messages(
            lc_messages, max_tokens=budget, strategy="last", token_counter="approximate"
        ),
        repeat=10,
    )
    print(f"trim_messages (last, approximate, {budget} tokens): median {trim * 1e3:.3f} ms")
    ratio = trim / max(results.values())
    print(f"plan vs trim_messages: {ratio:.1f}x")
    ok &= ratio >= 30

    scaling = {}
    for count in (1_000, 10_000, 100_000):
        history = make_messages(count)
        conv = Conversation(messages=counted(history))
        scaling[count] = median_seconds(lambda conv=conv: plan(conv, PROFILE, mode="full"), 30)
        plain = Conversation(messages=history)
        walked = median_seconds(lambda plain=plain: plan(plain, PROFILE, mode="full"), 10)
        print(
            f"plan full {count:>7,} messages: median {scaling[count] * 1e3:.3f} ms "
            f"(a plain list, walked: {walked * 1e3:.3f} ms)"
        )
    print(f"100,000 / 1,000 messages: {scaling[100_000] / scaling[1_000]:.2f}x (bar: <= 2x)")
    ok &= scaling[100_000] <= 2 * scaling[1_000]

    backlog = Conversation(messages=counted(make_messages(10_000, seed=11)))
    before = plan(backlog, PROFILE, mode="full", draft="And now?")
    request = before.compaction.request
    assert request is not None
    rounds: list[int] = []

    def stub(round_: object) -> str:
        rounds.append(1)
        return "summary " * 500

    start = time.perf_counter()
    result = run_fold(fold(backlog, PROFILE, mode="full", draft="And now?"), stub)
    seconds = time.perf_counter() - start
    print(
        f"fold of a 10,000-message backlog: {result.rounds} rounds (estimated {request.rounds}), "
        f"{result.folded:,} messages, {seconds * 1e3:.0f} ms in the engine "
        f"({seconds / max(1, result.rounds) * 1e3:.1f} ms a round); fits after: {result.plan.fits}"
    )
    ok &= result.plan.fits and not result.plan.compaction.needed

    sample = " ".join(m.content for m in messages[:2_000])
    sample += ' Привет, мир! 你好，世界。 {"id": 12345, "ok": true} 🙂' * 2_000
    size_mb = len(sample.encode("utf-8")) / 1e6
    for name in ("estimate", "o200k_base"):
        tok = get_tokenizer(name)
        tok.count("warm up")
        seconds = median_seconds(lambda tok=tok: tok.count(sample), repeat=5)
        print(f"count {name:10}: {size_mb / seconds:.1f} MB/s ({size_mb:.1f} MB)")
    print("bars: " + ("met" if ok else "MISSED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
