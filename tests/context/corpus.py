"""A small multilingual corpus for checking that the ``estimate`` tokenizer is conservative.

Written for this project (no third-party text).  Each sample stands for a kind of content a
chat carries: prose in several scripts, code, JSON, long digit runs, emoji and mixtures.
"""

from __future__ import annotations

import base64
import json
import random
import re
import struct
import zlib

from chatmem.context import get_tokenizer

ENGLISH = (
    "The committee met on Tuesday to review the budget for the coming year. After a long "
    "discussion, the members agreed that the library should keep its evening hours, even "
    "though the heating costs have risen sharply since the winter began. Several residents "
    "wrote letters asking for more children's books, and the librarian promised to look into "
    "a small grant from the regional council. Nobody expected the meeting to run past nine, "
    "but the question of parking near the new community garden kept everyone talking until "
    "the caretaker politely turned off the lights in the hallway.\n\n"
    "In the morning she walked to the station, bought a newspaper and a coffee, and waited for "
    "the train that was, as usual, a few minutes late. Her thoughts kept returning to the "
    "letter she had not yet answered: it was kind, careful and slightly puzzling, the sort of "
    "message that deserves a reply written slowly rather than typed in a hurry."
)

RUSSIAN = (
    "Вчера вечером мы долго обсуждали план поездки на север. Решили выехать рано утром, "
    "чтобы успеть до темноты добраться до маленькой деревни у озера, где живёт бабушка "
    "Светланы. Дорога там неровная, поэтому возьмём запасное колесо, термос с чаем и тёплые "
    "вещи: в конце октября погода меняется каждый час. Если всё пойдёт хорошо, в субботу "
    "сходим за грибами, а в воскресенье вернёмся домой."
)

CHINESE = (
    "我们昨天在图书馆讨论了明年的工作计划。大家一致认为应该增加儿童读物的数量，同时延长晚上的"
    "开放时间。会议结束以后，管理员答应向地区委员会申请一笔小额资金，用来购买新的书架和桌椅。"
    "窗外下着小雨，街上的行人撑着伞匆匆走过，远处传来火车的汽笛声。"
)

CODE = '''\
def merge_intervals(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Merge overlapping half-open intervals; the input need not be sorted."""
    result: list[tuple[int, int]] = []
    for start, end in sorted(intervals):
        if result and start <= result[-1][1]:
            result[-1] = (result[-1][0], max(result[-1][1], end))
        else:
            result.append((start, end))
    return result


class Cache:
    def __init__(self, size=128):
        self._data = {}
        self._size = size

    def get(self, key, default=None):
        return self._data.get(key, default)
'''

JSON = (
    '{"id": "7f3a9c2e-41b8-4d0e-9a6f-2c51e8b0d4a7", "type": "function", '
    '"function": {"name": "get_weather", "arguments": "{\\"city\\": \\"Zürich\\", '
    '\\"days\\": 3, \\"units\\": \\"metric\\"}"}, "items": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], '
    '"nested": {"a": {"b": {"c": [true, false, null, 0.5, -12e3]}}}, "hash": '
    '"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}'
)

DIGITS = (
    "3141592653589793238462643383279502884197169399375105820974944592307816406286"
    " 1,2,3,4,5,6,7,8,9,0 00000000000000000000 12.5 -7 1e10 0x7fffffff 2026-11-30T10:00:00Z"
)

EMOJI = "🙂😀🎉👍🏽👨‍👩‍👧‍👦🇺🇦🇯🇵🧑🏿‍💻❤️🔥✨🚀 🐍🦀 ok 👋"

MIXED = (
    "Meeting notes — встреча 12.03 — 会议 📅: budget €1,250.00 (≈ $1 340), owner: Zoë "
    "O'Brien <zoe@example.org>; TODO: ✅ ship v2.1.0-rc.3, ❌ drop IE11. `x = a[i] ** 2 // 3`"
)

SPECIAL = "<|endoftext|> and <|im_start|>user text"

CORPUS: dict[str, str] = {
    "english": ENGLISH,
    "russian": RUSSIAN,
    "chinese": CHINESE,
    "code": CODE,
    "json": JSON,
    "digits": DIGITS,
    "emoji": EMOJI,
    "mixed": MIXED,
    "special": SPECIAL,
}

SHORT_WORDS = "a b c I x y z, so I do: if a = b then c is 1 or 2 - ok? no. we go on; up to it."

MARKDOWN = (
    "## Results\n\n| name | score | delta |\n| --- | ---: | ---: |\n| alpha | 0.91 | +0.02 |\n"
    "| beta | 0.87 | -0.01 |\n\n- **Bold** item with `inline code`\n- [link](https://example.org/a?b=c&d=e)\n"
    '> Quote: "It works," she said.\n'
)

CORPUS.update({"short_words": SHORT_WORDS, "markdown": MARKDOWN})

LONG_WORDS = (
    "Internationalization of the documentation requires understanding, responsibility and "
    "extraordinary administrative coordination; electroencephalography, photosynthesis and "
    "thermodynamics are notoriously counterintuitive subjects for undergraduate students."
)

CORPUS["long_words"] = LONG_WORDS

# --- The ratio table (bench/tokens.py and tests/context/test_tokens.py) -------------------------
# Kinds of content, several samples each, built deterministically from the texts above and a
# seeded generator: the estimate must never count fewer tokens than o200k_base, cl100k_base or
# a tokenizer that splits every digit (CTX-1).

JAPANESE = (
    "昨日の午後、駅の近くの小さな喫茶店で友人と会いました。窓の外では雨が静かに降っていて、"
    "店の中にはコーヒーの香りが広がっていました。私たちは来月の旅行について話し合い、"
    "京都の古いお寺を訪ねることに決めました。帰り道、本屋に寄って地図と料理の本を買いました。"
)

KOREAN = (
    "어제 저녁에 우리는 도서관에서 내년 계획에 대해 오랫동안 이야기했습니다. 모두들 어린이 책을 "
    "더 많이 사야 한다고 생각했고, 저녁 시간에도 문을 열어 두기로 했습니다. 회의가 끝난 뒤에 "
    "비가 조금 내렸지만 우리는 천천히 걸어서 집으로 돌아갔습니다."
)

CODE_JS = """\
export async function fetchOrders(client, { since, limit = 100 } = {}) {
  const params = new URLSearchParams({ since: since.toISOString(), limit: String(limit) });
  const response = await client.get(`/api/v2/orders?${params}`);
  if (!response.ok) {
    throw new Error(`orders: HTTP ${response.status} ${response.statusText}`);
  }
  const { items, nextCursor } = await response.json();
  return items.map((item) => ({ ...item, total: item.quantity * item.unitPrice }));
}
"""

CODE_SQL = """\
SELECT o.id, o.created_at, c.name AS customer, SUM(l.quantity * l.unit_price) AS total
  FROM orders o
  JOIN customers c ON c.id = o.customer_id
  JOIN order_lines l ON l.order_id = o.id
 WHERE o.created_at >= DATE '2026-01-01' AND o.status IN ('paid', 'shipped')
 GROUP BY o.id, o.created_at, c.name
HAVING SUM(l.quantity * l.unit_price) > 1000
 ORDER BY total DESC LIMIT 50;
"""


def _rng(seed: int) -> random.Random:
    return random.Random(seed)


def order_numbers(seed: int, lines: int) -> str:
    """Lines of order numbers, as in issue 11 (11,270 characters: one token per digit)."""
    rng = _rng(seed)
    out = []
    for _ in range(lines):
        out.append(
            f"{rng.randrange(10**11, 10**12)} {rng.randrange(10**7, 10**8)} "
            f"{rng.randrange(1, 999)} {rng.randrange(100, 99999)}.{rng.randrange(100):02d}"
        )
    return "\n".join(out)


def _digit_runs(seed: int) -> str:
    rng = _rng(seed)
    return "".join(str(rng.randrange(10)) for _ in range(rng.randrange(200, 2000)))


def _phone_list(seed: int) -> str:
    rng = _rng(seed)
    return ", ".join(
        f"+{rng.randrange(1, 99)} ({rng.randrange(100, 999)}) {rng.randrange(100, 999)}-"
        f"{rng.randrange(1000, 9999)}"
        for _ in range(60)
    )


def _json_records(seed: int) -> str:
    rng = _rng(seed)
    records = [
        {
            "order_id": f"ORD-{rng.randrange(10**9):09d}",
            "sku": f"SKU{rng.randrange(10**6)}",
            "quantity": rng.randrange(1, 20),
            "price": round(rng.uniform(1, 500), 2),
            "paid": rng.random() < 0.5,
            "tags": rng.sample(["gift", "express", "fragile", "bulk", "return"], 2),
            "customer": {"id": rng.randrange(10**6), "country": rng.choice(["DE", "RU", "JP"])},
        }
        for _ in range(30)
    ]
    return json.dumps(records, indent=rng.choice([None, 2]))


def _random_base64(seed: int, size: int, *, urlsafe: bool = False) -> str:
    rng = _rng(seed)
    raw = bytes(rng.randrange(256) for _ in range(size))
    return (base64.urlsafe_b64encode if urlsafe else base64.b64encode)(raw).decode("ascii")


def _png_base64(seed: int) -> str:
    """A small real PNG (zlib-compressed noise), base64-encoded as an MCP ImageContent is."""
    rng = _rng(seed)
    width = height = 24
    rows = b"".join(
        b"\x00" + bytes(rng.randrange(256) for _ in range(width * 3)) for _ in range(height)
    )

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    png = (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )
    return base64.b64encode(png).decode("ascii")


def _sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?。])\s*", text) if s.strip()]


def _hex_digests(seed: int) -> str:
    rng = _rng(seed)
    return " ".join(f"{rng.getrandbits(256):064x}" for _ in range(rng.randrange(1, 6)))


def kinds() -> dict[str, list[str]]:
    """The samples of the ratio table, by kind (base64 includes hex digests)."""
    return {
        "prose": [
            ENGLISH,
            RUSSIAN,
            LONG_WORDS,
            SHORT_WORDS,
            MARKDOWN,
            MIXED,
            *_sentences(ENGLISH),
            *_sentences(RUSSIAN),
        ],
        "code": [CODE, CODE_JS, CODE_SQL, JSON, _json_records(1), _json_records(2)],
        "digits": [
            DIGITS,
            order_numbers(1, 300),
            order_numbers(2, 20),
            _phone_list(3),
            *(_digit_runs(seed) for seed in range(4, 10)),
        ],
        "cjk": [CHINESE, JAPANESE, KOREAN, *_sentences(CHINESE), *_sentences(JAPANESE)],
        "base64": [
            _png_base64(1),
            _png_base64(2),
            _random_base64(3, 4096),
            *(_random_base64(seed, 300, urlsafe=seed % 2 == 0) for seed in range(4, 20)),
            *(_hex_digests(seed) for seed in range(20, 24)),
        ],
    }


def per_digit_count(text: str) -> int:
    """A tokenizer that splits every digit (Gemma, Llama 2, Mistral…), modelled on o200k_base.

    o200k_base pre-tokenizes digits apart from everything else, in runs of one to three, and
    every such run is a single token; a per-digit tokenizer spends one token on each digit
    instead.  So this is o200k_base's count plus, for every run of ``n`` ASCII digits,
    ``n - ceil(n / 3)`` — the same as o200k_base on the text with a space between every two
    digits, minus those spaces (checked in tests/context/test_tokens.py)."""
    extra = sum(len(run) - -(-len(run) // 3) for run in re.findall(r"[0-9]+", text))
    return get_tokenizer("o200k_base").count(text) + extra


REAL_TOKENIZERS = ("o200k_base", "cl100k_base", "per_digit")


def real_count(tokenizer: str, text: str) -> int:
    """Tokens of ``text`` under one of :data:`REAL_TOKENIZERS`."""
    if tokenizer == "per_digit":
        return per_digit_count(text)
    return get_tokenizer(tokenizer).count(text)
