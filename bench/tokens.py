"""Benchmark of the conservative token estimate (CTX-1, issue 11): estimate / real ratios.

For each kind of content in ``tests/context/corpus.py`` (prose in English and Russian, code and
JSON, digit runs such as order numbers, Chinese / Japanese / Korean, base64 and hex) and each
real tokenizer — ``o200k_base`` and ``cl100k_base`` (exact, offline, ``bpe-openai``) and a
tokenizer that splits every digit (Gemma, Llama 2, Mistral…; modelled as ``o200k_base`` with
every digit run split into single digits, see ``corpus.per_digit_count``) — the table gives the
smallest and the median ratio of the ``estimate`` count to the real count over the samples of
that kind.  Bar: every minimum >= 1.0 (the estimate never undercounts).  Then the estimate's
throughput in MB/s.  Exit status 1 when the bar is missed.

    .venv/bin/python bench/tokens.py
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "context"))

import corpus  # the test corpus, shared with tests/context/test_tokens.py

from chatmem.context import get_tokenizer

LABELS = {"o200k_base": "o200k", "cl100k_base": "cl100k", "per_digit": "per-digit"}


def ratios(kind: str, samples: list[str], tokenizer: str) -> list[float]:
    estimate = get_tokenizer("estimate")
    return [estimate.count(s) / corpus.real_count(tokenizer, s) for s in samples]


def main() -> int:
    ok = True
    header = " | ".join(f"{LABELS[t]} min / median" for t in corpus.REAL_TOKENIZERS)
    print(f"| kind | samples | {header} |")
    print("| --- | ---: |" + " ---: |" * len(corpus.REAL_TOKENIZERS))
    for kind, samples in corpus.kinds().items():
        cells = []
        for tokenizer in corpus.REAL_TOKENIZERS:
            values = ratios(kind, samples, tokenizer)
            ok &= min(values) >= 1.0
            cells.append(f"{min(values):.2f} / {statistics.median(values):.2f}")
        print(f"| {kind} | {len(samples)} | " + " | ".join(cells) + " |")
    print("bar: every minimum >= 1.00 (the estimate never undercounts)")

    sample = "\n".join(s for samples in corpus.kinds().values() for s in samples) * 20
    size_mb = len(sample.encode("utf-8")) / 1e6
    estimate = get_tokenizer("estimate")
    times = []
    for _ in range(7):
        start = time.perf_counter()
        estimate.count(sample)
        times.append(time.perf_counter() - start)
    print(f"count estimate: {size_mb / statistics.median(times):.1f} MB/s ({size_mb:.1f} MB)")
    print("bars: " + ("met" if ok else "MISSED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
