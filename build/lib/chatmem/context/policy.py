"""The compaction policy (CTX-3..CTX-7, CTX-11, CTX-21): when memory is folded and what stays.

==========  ==========================  ====================================  ======================
mode        a fold is wanted when       what stays verbatim (the *floor*)     defaults (knobs)
==========  ==========================  ====================================  ======================
off         never                       nothing: no history is sent           —
economy     B complete pairs beyond     the newest K complete pairs; older    K = ECONOMY_PAIRS (3),
            the newest K have gathered  ones go in whole batches of B         B = ECONOMY_BATCH (4)
            (or the history overflows)  (all but K when it overflows)
full        request + answer reserve    the last N messages, cut at a pair    N = FULL_KEEP_MESSAGES
            > :func:`full_threshold`    boundary, never inside the last       (20); threshold
            (or the history overflows); complete pair                         min(FULL_THRESHOLD_
            a fold the request does                                           FRACTION (0.8) x
            not need must save at                                             window, FULL_THRESHOLD
            least MIN_UNLOAD_FRACTION                                         _CAP (200,000))
            (0.2) of it
window      never (no summary)          the newest N messages within C        N = WINDOW_MESSAGES
                                        characters                            (12), C = WINDOW_CHARS
                                                                              (8,000)
stateless   never: always ``off``       nothing                               —
manual      "Compress now" (CTX-11)     the last complete pair; refused       MANUAL_MIN_COMPLETE
                                        with fewer than two complete pairs    _PAIRS (2)
==========  ==========================  ====================================  ======================

Every knob is the :class:`~chatmem.context.values.Profile` field of the same name in lower
case (``economy_pairs``, ``full_threshold_fraction``…); the constants here are their
defaults.  In every summary mode a fold is also mandatory when the history after the summary
does not fit; the verbatim tail is then what fits above the floor, newest first, beside a new
summary at its cap (CTX-21, :func:`~chatmem.context.compaction.summary_cap`): the policy
shrinks down to the current turn alone rather than refuse.  Where the floors are found in a
conversation (the pair walks) is :mod:`chatmem.context.modes`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from chatmem.context.values import Profile

#: K (CTX-4): complete pairs ``economy`` keeps verbatim.
ECONOMY_PAIRS = 3
#: B (CTX-4): complete pairs ``economy`` folds at once.
ECONOMY_BATCH = 4
#: CTX-5: share of the window above which ``full`` folds.
FULL_THRESHOLD_FRACTION = 0.8
#: CTX-5: the threshold in tokens is never above this, whatever the window.
FULL_THRESHOLD_CAP = 200_000
#: CTX-5: messages ``full`` keeps verbatim.
FULL_KEEP_MESSAGES = 20
#: N (CTX-6): messages ``window`` sends, the current one included.
WINDOW_MESSAGES = 12
#: C (CTX-6): characters ``window`` sends.
WINDOW_CHARS = 8_000
#: CTX-5 "noticeably unloads": a fold the request does not need must remove at least this
#: share of the request's tokens.
MIN_UNLOAD_FRACTION = 0.2
#: CTX-11: "Compress now" keeps the last complete pair, so it needs at least two.
MANUAL_MIN_COMPLETE_PAIRS = 2


def full_threshold(profile: Profile) -> int:
    """CTX-5: the auto-compaction threshold in tokens (request + answer reserve)."""
    return min(
        int(profile.full_threshold_fraction * profile.context_window), profile.full_threshold_cap
    )


def over_threshold(profile: Profile, request_tokens: int) -> bool:
    """CTX-5: ``full`` wants a fold of a request of ``request_tokens`` (answer reserve
    included)."""
    return request_tokens > full_threshold(profile)


def noticeably_unloads(saved: int, request_tokens: int) -> bool:
    """CTX-5: a fold the request does not need saves at least :data:`MIN_UNLOAD_FRACTION` of
    it (``saved`` counts the new summary's maximum length against the saving)."""
    return saved >= MIN_UNLOAD_FRACTION * request_tokens


def economy_fold_count(profile: Profile, complete_pairs: int) -> int:
    """CTX-4: how many of ``complete_pairs`` (those the walk took) ``economy`` folds: whole
    batches of B beyond the newest K; 0 while fewer than B wait."""
    pending = complete_pairs - max(0, profile.economy_pairs)
    batch = max(1, profile.economy_batch)
    if pending < batch:
        return 0
    return (pending // batch) * batch
