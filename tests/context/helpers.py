"""Builders for engine tests: short conversations written as data."""

from __future__ import annotations

from chatmem.context import Conversation, Message, ToolCall


def pairs(count: int, *, prefix: str = "m", size: int = 10, start: int = 0) -> list[Message]:
    """``count`` complete question–answer pairs with ids m0, m1, …"""
    out: list[Message] = []
    for k in range(count):
        i = start + 2 * k
        words = " ".join(["memory"] * (size // 5))
        out.append(Message(f"{prefix}{i}", "user", f"question {k} about {words}"))
        out.append(Message(f"{prefix}{i + 1}", "assistant", f"answer {k} is {words}"))
    return out


def tool_pair(i: int, *, with_result: bool = True) -> list[Message]:
    call = ToolCall(f"call{i}", "lookup", '{"q": 1}')
    out = [
        Message(f"t{i}u", "user", "use the tool"),
        Message(f"t{i}a", "assistant", "", tool_calls=(call,)),
    ]
    if with_result:
        out.append(Message(f"t{i}r", "tool", "result text", tool_call_id=call.id))
    out.append(Message(f"t{i}f", "assistant", "done"))
    return out


def conv(messages: list[Message], **kwargs: object) -> Conversation:
    return Conversation(messages=tuple(messages), **kwargs)  # type: ignore[arg-type]
