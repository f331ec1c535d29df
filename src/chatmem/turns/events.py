"""Run events: the numbered, typed records a turn emits (TURN-6).

A run's events are numbered from 1 by the one task that runs it, so a sequence number is a
cursor: a client that saw event ``n`` resumes with ``Last-Event-ID: n``.  The same value is
published live through the coordinator and stored with the run (``run_events``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

#: After one of these nothing more is emitted for the run; watchers stop.  (The other types:
#: ``delta``, ``tool_call``, ``approval``, ``tool_result``, ``compaction``.)
TERMINAL: frozenset[str] = frozenset({"done", "error"})


@dataclass(frozen=True)
class RunEvent:
    seq: int
    type: str
    data: dict[str, Any]

    @property
    def terminal(self) -> bool:
        return self.type in TERMINAL

    def to_json(self) -> str:
        return json.dumps(
            {"seq": self.seq, "type": self.type, "data": self.data}, ensure_ascii=False
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> RunEvent:
        raw = json.loads(text)
        return cls(seq=int(raw["seq"]), type=str(raw["type"]), data=dict(raw["data"]))

    def sse(self) -> str:
        """The event as one Server-Sent Events frame (``id`` = sequence number)."""
        payload = json.dumps(self.data, ensure_ascii=False, separators=(",", ":"))
        return f"id: {self.seq}\nevent: {self.type}\ndata: {payload}\n\n"
