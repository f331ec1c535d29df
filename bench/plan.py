"""Benchmark of the context engine (issue 2): planning cost vs LangChain's trim_messages.

* A 10,000-message conversation (mixed lengths, some tool calls) with cached token counts is
  planned in ``full`` and ``window`` mode; on the same messages in the same run,
  ``langchain_core.messages.trim_messages`` (strategy "last", the same token budget) trims
  them twice: like for like — its ``token_counter`` sums the SAME cached counts the plan
  reads (what a LangChain app keeping counts would do) — and the recount baseline — its own
  ``approximate`` counter, recounting every message on every call.  The like-for-like ratio
  is the honest one and comes first (at 1,000, 10,000 and 100,000 messages: the difference is
  the plan's walk that stops at the window, against a binary search over prefix sums); the
  recount ratio is printed next to it (bar: >= 30x at 10,000, against the slower plan mode).
* Plan time at 1,000, 10,000 and 100,000 messages (bar: the 100,000 figure <= 2x the 1,000
  one).  These histories have no summary yet, so every plan also prices the whole fold the
  next request needs (CTX-21): the history answers ``tokens_between`` from sums it holds, as
  the server's loader answers it with one indexed SUM (``CountedMessages``, built once, like
  the cached counts).  The same plan over a plain list, which the engine must walk, is printed
  beside it.
* A fold of a 10,000-message backlog (no summary, full mode, 32K window) driven to its end
  with a stub summariser: its rounds and its time (the engine's side of a fold; the model
  calls are the rest).
* Token counting throughput in MB/s for ``estimate``, ``o200k_base`` and ``cl100k_base`` on
  three corpora: real code (this Python's standard library, ``lib/python3.X/*.py``), English
  prose (Python's own help topics, ``pydoc_data.topics``) and the synthetic sample (chat
  words plus Russian, Chinese, JSON and emoji).
Exit status 1 when a bar is missed.
"""

from __future__ import annotations

import random
import statistics
import sys
import sysconfig
import time
from collections.abc import Callable
from pathlib import Path

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


def code_corpus() -> str:
    """Real source code: the top-level modules of this Python's standard library."""
    library = Path(sysconfig.get_paths()["stdlib"])
    return "\n".join(
        path.read_text(encoding="utf-8", errors="replace") for path in sorted(library.glob("*.py"))
    )


def prose_corpus() -> str:
    """Long English prose: the text of Python's ``help()`` topics (the language reference)."""
    from pydoc_data.topics import topics

    return "\n\n".join(topics[name] for name in sorted(topics))


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
    for count in (1_000, 10_000, 100_000):
        history = messages if count == 10_000 else make_messages(count)
        conv = conversation if count == 10_000 else Conversation(messages=counted(history))
        ours = max(
            median_seconds(lambda m=mode, c=conv: plan(c, PROFILE, mode=m), repeat=20)
            for mode in ("full", "window")
        )
        lc_messages = to_langchain(history)
        cached = {m.id: m.tokens for m in history}

        def same_counts(batch: list[object], cached: dict[str, int] = cached) -> int:
            return sum(cached[m.id] for m in batch)  # type: ignore[attr-defined]

        like = median_seconds(
            lambda lc=lc_messages, counter=same_counts: trim_messages(
                lc, max_tokens=budget, strategy="last", token_counter=counter
            ),
            repeat=10,
        )
        line = (
            f"{count:>7,} messages: plan {ours * 1e3:.3f} ms; trim_messages with the same "
            f"cached counts {like * 1e3:.3f} ms -> like-for-like {like / ours:.1f}x"
        )
        if count <= 10_000:  # recounting 100,000 messages per call takes seconds
            recount = median_seconds(
                lambda lc=lc_messages: trim_messages(
                    lc, max_tokens=budget, strategy="last", token_counter="approximate"
                ),
                repeat=5,
            )
            line += f"; recounting every call {recount * 1e3:.3f} ms -> {recount / ours:.1f}x"
            if count == 10_000:
                ok &= recount / ours >= 30
        print(line, flush=True)

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
    corpora = {
        "code (stdlib *.py)": code_corpus(),
        "prose (pydoc topics)": prose_corpus(),
        "sample (chat words)": sample,
    }
    for label, text in corpora.items():
        size_mb = len(text.encode("utf-8")) / 1e6
        cells = []
        for name in ("estimate", "o200k_base", "cl100k_base"):
            tok = get_tokenizer(name)
            tok.count("warm up")
            seconds = median_seconds(lambda tok=tok, text=text: tok.count(text), repeat=3)
            cells.append(f"{name} {size_mb / seconds:.1f} MB/s")
        print(f"count {label} ({size_mb:.1f} MB): " + ", ".join(cells), flush=True)
    print("bars: " + ("met" if ok else "MISSED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
