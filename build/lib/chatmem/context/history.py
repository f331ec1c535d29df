"""Walking a conversation's history from the newest message backwards, one pair at a time.

A *pair* (CTX-15) is a user question and everything after it up to the next user question:
the answer, and the assistant tool calls and tool results in between.  Messages before the
first user question form a leading pair of their own that is never "complete".  A pair is
*complete* when it starts with a user message and ends with an assistant message that asks
for no tool call.  Excluding any message of a pair excludes the whole pair.

The walker is the engine's only loop over history and it runs backwards from a stop index,
so planning touches only as much of the tail as the mode needs (cost grows with the window,
not with the history).  It stops by itself at the summary boundary (the message whose id is
``Summary.through``, CTX-9) and the caller stops it when the token budget is spent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol, overload

from chatmem.context.errors import PlanInputError
from chatmem.context.values import Message


@dataclass(frozen=True, slots=True)
class Pair:
    start: int  # index of its first message
    stop: int  # index after its last message
    tokens: int  # sum of the messages' cached counts
    complete: bool
    excluded: bool


TokensOf = Callable[[Message], int]


def is_complete(messages: Sequence[Message], start: int, stop: int) -> bool:
    last = messages[stop - 1]
    return (
        messages[start].role == "user"
        and stop - start >= 2
        and last.role == "assistant"
        and not last.tool_calls
    )


class PairWalker:
    """Iterate the pairs of ``messages[:stop]`` newest first, down to the summary boundary.

    After iteration ``boundary`` is the index of the summary's last message, or -1 when there
    is no summary (the walk reached the start).  While iteration is cut short by the caller
    it stays ``None`` (unknown)."""

    def __init__(
        self,
        messages: Sequence[Message],
        stop: int,
        through: str | None,
        tokens_of: TokensOf,
    ) -> None:
        self.messages = messages
        self.stop = stop
        self.through = through
        self.tokens_of = tokens_of
        self.boundary: int | None = None

    def __iter__(self) -> Iterator[Pair]:
        messages = self.messages
        through = self.through
        tokens_of = self.tokens_of
        end = self.stop
        tokens = 0
        excluded = False
        i = end - 1
        while i >= 0:
            message = messages[i]
            if through is not None and message.id == through:
                self.boundary = i
                if end > i + 1:
                    yield Pair(i + 1, end, tokens, is_complete(messages, i + 1, end), excluded)
                return
            cached = message.tokens
            tokens += cached if cached is not None else tokens_of(message)
            excluded = excluded or message.excluded
            if message.role == "user":
                yield Pair(i, end, tokens, is_complete(messages, i, end), excluded)
                end = i
                tokens = 0
                excluded = False
            i -= 1
        if end > 0:
            yield Pair(0, end, tokens, False, excluded)
        if through is not None:
            raise PlanInputError(
                f"the summary covers messages up to {through!r}, which is not in the conversation"
            )
        self.boundary = -1


class CountedHistory(Protocol):
    """What a history sequence may offer to spare the engine a walk over a long backlog:
    storage answers these from its index (one query) instead of handing every message in.
    A plain list offers neither, and the engine walks it."""

    def tokens_between(self, start: int, stop: int) -> int:
        """Sum of the cached counts of ``messages[start:stop]``."""
        ...

    def index_of(self, message_id: str) -> int | None:
        """Index of ``message_id``, or None when it is not in the history."""
        ...


class CountedMessages(Sequence[Message]):
    """A history held in memory that answers :class:`CountedHistory` from prefix sums built
    once, as storage answers it from its index: for callers that plan or fold the same long
    history many times (a fold, the offline CLI, benchmarks, an embedding program)."""

    def __init__(self, messages: Sequence[Message], tokens_of: TokensOf) -> None:
        self._messages = list(messages)
        self._prefix = [0]
        total = 0
        for message in self._messages:
            total += message.tokens if message.tokens is not None else tokens_of(message)
            self._prefix.append(total)
        self._index = {message.id: i for i, message in enumerate(self._messages)}

    def __len__(self) -> int:
        return len(self._messages)

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> list[Message]: ...

    def __getitem__(self, index: int | slice) -> Message | list[Message]:
        return self._messages[index]

    def tokens_between(self, start: int, stop: int) -> int:
        start, stop = max(0, start), min(stop, len(self._messages))
        return self._prefix[stop] - self._prefix[start] if stop > start else 0

    def index_of(self, message_id: str) -> int | None:
        return self._index.get(message_id)


def tokens_between(messages: Sequence[Message], start: int, stop: int, tokens_of: TokensOf) -> int:
    """Tokens of ``messages[start:stop]`` (cached counts): from the sequence when it can
    say, else summed here."""
    if stop <= start:
        return 0
    ask = getattr(messages, "tokens_between", None)
    if ask is not None:
        return int(ask(start, stop))
    total = 0
    for i in range(start, stop):
        message = messages[i]
        cached = message.tokens
        total += cached if cached is not None else tokens_of(message)
    return total


def find_backward(messages: Sequence[Message], message_id: str, before: int) -> int:
    """Index of ``message_id`` searching backwards from ``before`` (exclusive)."""
    ask = getattr(messages, "index_of", None)
    if ask is not None:
        found = ask(message_id)
        if found is not None and found < before:
            return int(found)
    for i in range(before - 1, -1, -1):
        if messages[i].id == message_id:
            return i
    raise PlanInputError(f"message {message_id!r} is not in the conversation")


def excluded_flags(messages: Sequence[Message], stop: int) -> list[bool]:
    """For each message below ``stop``: does it belong to an excluded pair?  One forward pass."""
    flags = [False] * stop
    start = 0
    for i in range(stop + 1):
        if i == stop or (messages[i].role == "user" and i > start):
            if any(messages[j].excluded for j in range(start, i)):
                for j in range(start, i):
                    flags[j] = True
            start = i
    return flags
