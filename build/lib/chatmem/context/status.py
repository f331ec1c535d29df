"""The status of every stored message (CTX-14), kept as ranges and expanded only on demand.

Planning decides explicitly only about the tail it walked (``lo`` onwards).  Everything older
follows one rule: ``summarized`` up to the summary's last message when the mode sends the
summary, ``out_of_memory`` otherwise, and ``excluded`` for messages of an excluded pair
(CTX-15) whatever the range.  So a plan costs O(tail); reading the statuses of a 100,000-message
conversation costs one pass, once, when somebody asks.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from chatmem.context.history import excluded_flags, find_backward
from chatmem.context.values import Message, MessageStatus


class StatusMap(Mapping[str, MessageStatus]):
    """Message id -> status for every stored message, oldest first; immutable."""

    def __init__(
        self,
        messages: Sequence[Message],
        lo: int,
        explicit: Sequence[MessageStatus],
        *,
        summary_through: str | None,
        boundary: int | None,
        summarized_below: int | None = None,
    ) -> None:
        # ``explicit`` covers messages[lo:]; ``summary_through`` is set only when the mode sends
        # the summary; ``boundary`` is its index when the planner already found it.
        self._messages = messages
        self._lo = lo
        self._explicit = explicit
        self._through = summary_through
        self._boundary = boundary
        # A planned fold (CTX-21): every message below this index will be in the summary.
        self._summarized_below = summarized_below
        self._expanded: dict[str, MessageStatus] | None = None

    def _expand(self) -> dict[str, MessageStatus]:
        if self._expanded is None:
            messages, lo = self._messages, self._lo
            boundary = -1
            if self._summarized_below is not None:
                boundary = self._summarized_below - 1
            elif self._through is not None:
                known = self._boundary
                boundary = (
                    known if known is not None else find_backward(messages, self._through, lo)
                )
            excluded = excluded_flags(messages, lo)
            expanded: dict[str, MessageStatus] = {}
            for i in range(lo):
                if excluded[i]:
                    expanded[messages[i].id] = "excluded"
                elif i <= boundary:
                    expanded[messages[i].id] = "summarized"
                else:
                    expanded[messages[i].id] = "out_of_memory"
            for offset, status in enumerate(self._explicit):
                expanded[messages[lo + offset].id] = status
            self._expanded = expanded
        return self._expanded

    def tail(self) -> dict[str, MessageStatus]:
        """Only the statuses planning decided explicitly (cheap)."""
        lo = self._lo
        return {self._messages[lo + k].id: s for k, s in enumerate(self._explicit)}

    def __getitem__(self, message_id: str) -> MessageStatus:
        return self._expand()[message_id]

    def __iter__(self) -> Iterator[str]:
        return (message.id for message in self._messages)

    def __len__(self) -> int:
        return len(self._messages)

    def __contains__(self, message_id: object) -> bool:
        return message_id in self._expand()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return dict(self.items()) == dict(other.items())
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def to_dict(self) -> dict[str, MessageStatus]:
        return dict(self._expand())

    def __repr__(self) -> str:
        return f"StatusMap({len(self)} messages, {len(self._explicit)} decided explicitly)"
