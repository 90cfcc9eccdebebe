"""Numbers a model learns to copy: variants of the training pairs whose sides share a number,
that number replaced on both sides by others (``data.train.numbers``: how many a pair).

A corpus of image captions holds few numbers (Multi30k's training set: 172 pairs of 29,000),
too few for a model to learn to write a number's pieces as the source has them: the CPU
recipe's model read "Ein Mann kauft 3 Äpfel für 4,50 Euro." as "A man is buying 300's head for
4000.". Each variant puts other numbers (2-99 most often, then hundreds, years and thousands)
where the pair's shared ones stand, the same on both sides, so the model sees digits copied in
many more sentences. Numbers that stand alone are replaced (not a part of a word, a decimal, a
time or a date: "k-9", "4,50", "14:30"), and not 1 (its sentence says a singular).
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator

# a whole number, standing alone: not in a word, a decimal, a time, a date or a range
NUMBER = re.compile(r"(?<![\w.,:/-])\d+(?![\w/-]|[.,:]\d)")
VERSION = 1  # of the variants made (part of the corpus's fingerprint: the caches' keys)


def number_variants(src: str, tgt: str, count: int, seed: int) -> Iterator[tuple[str, str]]:
    """``count`` variants of the pair (``src``, ``tgt``), each with its shared numbers replaced
    by others on both sides (none where the sides share no number but 1); the same for the
    same ``seed``."""
    shared = sorted(set(NUMBER.findall(src)) & set(NUMBER.findall(tgt)) - {"1"})
    if not shared:
        return
    rng = random.Random(seed)
    taken = set(NUMBER.findall(src)) | set(NUMBER.findall(tgt))
    for _ in range(count):
        new: dict[str, str] = {}
        for number in shared:
            drawn = drawn_number(rng)
            while drawn in taken or drawn in new.values():
                drawn = drawn_number(rng)
            new[number] = drawn
        yield _replaced(src, new), _replaced(tgt, new)


def _replaced(text: str, new: dict[str, str]) -> str:
    """``text`` with each whole number ``new`` names replaced by its new one."""
    return NUMBER.sub(lambda match: new.get(match.group(), match.group()), text)


def drawn_number(rng: random.Random) -> str:
    """A number as a caption might have one: 2-99 half the time, then hundreds, years and
    thousands."""
    kind = rng.random()
    if kind < 0.5:
        return str(rng.randint(2, 99))
    if kind < 0.7:
        return str(rng.randint(100, 999))
    if kind < 0.85:
        return str(rng.randint(1900, 2029))
    return str(rng.randint(1000, 99999))
