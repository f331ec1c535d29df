"""A small multilingual corpus for checking that the ``estimate`` tokenizer is conservative.

Written for this project (no third-party text).  Each sample stands for a kind of content a
chat carries: prose in several scripts, code, JSON, long digit runs, emoji and mixtures.
"""

from __future__ import annotations

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
