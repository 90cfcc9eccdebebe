"""The target vocabulary's tokens read by what they write: those that write a digit (a
sentence whose numbers are all kept spans avoids them, ``glossary.steered``) and the
SentencePiece pieces that go on a word (a term's next piece, ``decode/constraints.py``).

Each is a read of the whole vocabulary (~4 ms for 6,000 words), made once for it, not at
every call: a lone sentence's ``Translator.translate`` paid it each time.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TypeVar, cast

from transformer_mt.data.vocab import Vocab

T = TypeVar("T")
BYTE = re.compile(r"<0x[0-9A-F]{2}>")  # a SentencePiece byte piece
# SentencePiece's byte pieces of ASCII letters and digits (a digit it has no piece for)
ALNUM_BYTES = frozenset(f"<0x{b:02X}>" for b in range(128) if chr(b).isalnum())
DIGIT_BYTES = frozenset(f"<0x{b:02X}>" for b in range(128) if chr(b).isdigit())


def digit_ids(vocab: Vocab) -> tuple[int, ...]:
    """The ids of the tokens that write a digit: a word or piece with one, a byte piece of an
    ASCII digit."""
    return _once(_digits, vocab)


def continuing_ids(vocab: Vocab) -> frozenset[int]:
    """The ids of the pieces that go on a word: a letter or digit first, or its byte piece
    ("▁" starts a word)."""
    return _once(_continuing, vocab)


def _digits(vocab: Vocab) -> tuple[int, ...]:
    return tuple(i for i, piece in enumerate(vocab.itos) if piece in DIGIT_BYTES or (
        not BYTE.fullmatch(piece) and any(c.isdigit() for c in piece)))


def _continuing(vocab: Vocab) -> frozenset[int]:
    return frozenset(i for i, piece in enumerate(vocab.itos)
                     if piece[:1].isalnum() or piece in ALNUM_BYTES)


_MADE: dict[Callable[[Vocab], object], tuple[Vocab, object]] = {}


def _once(make: Callable[[Vocab], T], vocab: Vocab) -> T:
    """``make(vocab)``, made once for the vocabulary last asked for (a server's model's, a
    translator's)."""
    made = _MADE.get(make)
    if made is None or made[0] is not vocab:
        made = _MADE[make] = (vocab, make(vocab))
    return cast(T, made[1])
