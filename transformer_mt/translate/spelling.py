"""Sentences typed without their language's letters: German on a keyboard without "ä", "ö",
"ü" and "ß" is written "ae", "oe", "ue" and "ss" ("Ein Maedchen laeuft ueber die Strasse", DIN
5007-2's spelling), Danish and Norwegian "aa" for "å", "oe" for "ø". A model trained on text
written with them reads such a word as rare pieces ("Maedchen": "▁Ma", "ed", "chen") and
translates it badly or not at all (test_2016_flickr so spelt, the seed-1234 hour model of
``config/cpu.yaml``: BLEU 35.56 against 42.99 as written; read so, 42.95).

So where a sentence has none of the letters below that the model's source side has, and has
their spellings, each word is read in the spelling the source side takes the fewest tokens
for (:func:`respelt`; unknown tokens counted twice), as typed unless another takes fewer and
reads each letter in a token with others: "laeuft" is read "läuft", "Strasse" "Straße", while
"neue", "Wasser", "dass" and "Kassierer" ("▁Ka", "ß", "ier", "er") are read as typed. The
same costs choose a word's case (``casing.py``), which reads a sentence in one case so spelt
too.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable

from transformer_mt.data.tokenize import Tokenizer
from transformer_mt.data.vocab import Vocab

# letters a keyboard may lack, as they are spelt without them
SPELT = {"ä": "ae", "ö": "oe", "ü": "ue", "ß": "ss", "å": "aa", "æ": "ae", "ø": "oe"}
MOST_SPELLINGS = 4  # a word's first four spellings are each read either way: 16 readings
WORDS = re.compile(r"[^\W\d_]+")  # runs of letters: the words read
SPANS = re.compile(r"\S+")
# a number, an address, a file name, a placeholder ({name}, %s), markup: as it is
KEPT = re.compile(r"\d|\w[./@:_\\]+\w|[{}%<>\[\]$#|~^*=+\\]")


class Reading:
    """How readily the source side reads a word."""

    def __init__(self, tokenizer: Tokenizer, vocab: Vocab) -> None:
        self.tokenizer, self.vocab = tokenizer, vocab

    def tokens(self, word: str) -> list[str]:
        # (a word model's tokens are its words: spaCy is not asked, nor makes them lexemes)
        return next(self.tokenizer.tokenize([word])) if self.tokenizer.subword else [word]

    def cost(self, word: str) -> tuple[int, int]:
        """Its tokens, unknown ones counted twice, then the highest of their ids (the rarest
        token: the vocabulary is most frequent first)."""
        unknown = len(self.vocab)
        ids = [self.vocab.stoi.get(t, unknown) for t in self.tokens(word)]
        return len(ids) + sum(i == unknown for i in ids), max(ids, default=0)

    def whole(self, word: str, letters: str) -> bool:
        """Whether none of ``letters`` in ``word`` is read as a token alone (where "Kassierer"
        read "Kaßierer" is "▁Ka", "ß", "ier", "er": fewer tokens, but no word)."""
        return not any(t.lstrip("▁").lower() in letters for t in self.tokens(word))


def missing_letters(sentence: str, vocab: Vocab) -> str:
    """The letters of :data:`SPELT` the source side has, where ``sentence`` has none of them
    (nor their capitals) but has a spelling of one; otherwise none."""
    letters = "".join(c for c in SPELT if c in vocab.letters)
    if not letters or any(c in sentence.lower() for c in letters):
        return ""
    lower = sentence.lower()
    return letters if any(SPELT[c] in lower for c in letters) else ""


def spellings(word: str, letters: str) -> list[str]:
    """``word`` (first) and its readings with each of its first :data:`MOST_SPELLINGS`
    spellings of ``letters`` read as the letter or left ("Maedchen": "Mädchen"), the letter
    in the case of the spelling's first ("Aerger": "Ärger")."""
    pattern = "|".join(sorted({SPELT[c] for c in letters}))
    found = list(re.finditer(pattern, word, re.IGNORECASE))[:MOST_SPELLINGS]
    if not found:
        return [word]
    choices = []
    for match in found:
        text = match.group()
        letter = [c for c in letters if SPELT[c] == text.lower()]
        choices.append([text, *(c.upper() if text[0].isupper() else c for c in letter)])
    readings = []
    for chosen in itertools.product(*choices):
        parts, end = [], 0
        for match, text in zip(found, chosen, strict=True):
            parts += [word[end:match.start()], text]
            end = match.end()
        readings.append("".join(parts) + word[end:])
    return readings


def either_way(text: str) -> list[str]:
    """``text`` and its spellings with the letters of :data:`SPELT` written as the letters or
    spelt out, whichever the text has ("Straße": "Strasse", "Straße"; "Strasse" too): how a
    glossary's term matches a sentence typed either way and read either way."""
    out = "".join(SPELT[c] if c in SPELT else SPELT[c.lower()].capitalize()
                  if c.lower() in SPELT else c for c in text)
    return list(dict.fromkeys([text, *spellings(out, "".join(SPELT))]))


def respelt(sentence: str, letters: str, reading: Reading) -> str:
    """``sentence`` with each word read in the spelling of fewest tokens, where one takes fewer
    than the word as typed and reads each of its letters in a token with others (then the one
    of the most frequent tokens); spans with a number, an address or a placeholder as they are
    ("www.strasse.de")."""
    def chosen(found: re.Match[str]) -> str:
        typed, *others = spellings(found.group(), letters)
        return better_spelt(typed, others, letters, reading)

    return words_read(sentence, lambda text: WORDS.sub(chosen, text))


def better_spelt(word: str, readings: Iterable[str], letters: str, reading: Reading) -> str:
    """The one of ``readings`` (of ``word`` with some of ``letters``) of fewest tokens (then of
    the most frequent ones) that reads each of its letters in a token with others, where it
    takes fewer tokens than ``word``; otherwise ``word``."""
    whole = [r for r in readings if reading.whole(r, letters)]
    best = min(whole, key=reading.cost, default=word)
    return best if reading.cost(best)[0] < reading.cost(word)[0] else word


def words_read(sentence: str, read: Callable[[str], str]) -> str:
    """``sentence`` with each span between spaces read by ``read``, but those with a number, an
    address, a file name or a placeholder, and those without a letter."""
    def span(found: re.Match[str]) -> str:
        text = found.group()
        return text if KEPT.search(text) or not WORDS.search(text) else read(text)

    return SPANS.sub(span, sentence)
