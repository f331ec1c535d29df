"""CTX-24: the pinned facts ("Remember always") as the model is sent them.

The user pins facts to a conversation — typed, picked from the summary's kept facts, or
selected in a message — and every request of that conversation carries them, whatever the
memory folds: they are not messages, so no summary ever covers them.  They go as one
message of their own in the instructions' role, right after the summary (where the summary
would be when there is none), in the order they were pinned:

* a header that says what they are (the user's, to be taken as written);
* each fact on a line of its own after ``- ``; a fact of several lines keeps them, indented
  under its first, so one fact never reads as two.

The text is a pure function of the facts, so the count cached when they change (CTX-2: the
store counts it for every tokenizer) is the count of what is sent.
"""

from __future__ import annotations

from collections.abc import Sequence

#: The longest fact, in characters: a fact is a line to keep, not a document (files are).
MAX_FACT_CHARS = 1_000
#: The most facts one conversation keeps.
MAX_FACTS = 50

HEADER = (
    "Facts the user asked you to always remember in this conversation "
    "(pinned by the user; each holds as written unless the user changes it):"
)


def render_pinned_facts(facts: Sequence[str]) -> str:
    """The message text for ``facts`` (oldest pinned first); empty for no facts."""
    if not facts:
        return ""
    lines = ["- " + fact.replace("\n", "\n  ") for fact in facts]
    return HEADER + "\n" + "\n".join(lines)
