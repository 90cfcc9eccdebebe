"""Sentences typed without their language's letters: German on a keyboard without "ä", "ö",
"ü" and "ß" is written "ae", "oe", "ue" and "ss" ("Ein Maedchen laeuft ueber die Strasse", DIN
5007-2's spelling) or without the dots ("Ein Madchen lauft uber die Strasse"), Danish and
Norwegian "aa" or "a" for "å", "oe" or "o" for "ø". A model trained on text written with them
reads such a word as rare pieces ("Maedchen": "▁Ma", "ed", "chen") and translates it badly or
not at all (test_2016_flickr so spelt, the seed-1234 hour model of ``config/cpu.yaml``: BLEU
35.56 and 35.77 against 42.99 as written; read so, 42.98 and 42.24).

So where a sentence has none of the letters below that the model's source side has, each word
is read in the spelling the source side takes the fewest tokens for (:func:`respelt`; unknown
tokens counted twice), as typed unless another takes fewer and reads each letter in a token
with others, and a vowel read with its dots only into a word the source side reads whole:
"laeuft" and "lauft" are read "läuft", "Strasse" "Straße", while "neue", "Wasser", "dass",
"halt" and "Kassierer" ("▁Ka", "ß", "ier", "er") are read as typed. The same costs choose a
word's case (``casing.py``), which reads a sentence in one case so spelt too.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable, Sequence

from transformer_mt.data.tokenize import Tokenizer
from transformer_mt.data.vocab import Vocab

# letters a keyboard may lack, as they are spelt without them
SPELT = {"ä": "ae", "ö": "oe", "ü": "ue", "ß": "ss", "å": "aa", "æ": "ae", "ø": "oe"}
BARE = {"ä": "a", "ö": "o", "ü": "u", "å": "a", "ø": "o"}  # or without their marks
MOST_SPELLINGS = 4  # a word's first four spellings are each read either way: 16 readings
WORDS = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)*")  # the words read ("man's": one)
SPANS = re.compile(r"\S+")
# a number, an address, a file name, a placeholder ({name}, %s), markup: as it is
KEPT = re.compile(r"\d|\w[./@:_\\]+\w|[{}%<>\[\]$#|~^*=+\\]")


class Reading:
    """How readily the source side reads a word."""

    def __init__(self, tokenizer: Tokenizer, vocab: Vocab) -> None:
        self.tokenizer, self.vocab = tokenizer, vocab
        self.read: dict[str, list[str]] = {}  # (a text's words recur)

    def tokens(self, word: str) -> list[str]:
        # (a word model's tokens are its words: spaCy is not asked, nor makes them lexemes)
        if not self.tokenizer.subword:
            return [word]
        if word not in self.read:
            self.read[word] = next(self.tokenizer.tokenize([word]))
        return self.read[word]

    def cost(self, word: str) -> tuple[int, int]:
        """Its tokens, unknown ones counted twice, then the highest of their ids (the rarest
        token: the vocabulary is most frequent first)."""
        unknown = len(self.vocab)
        ids = [self.vocab.stoi.get(t, unknown) for t in self.tokens(word)]
        return len(ids) + sum(i == unknown for i in ids), max(ids, default=0)

    def whole(self, word: str, letters: str) -> bool:
        """Whether none of ``letters`` in ``word`` is read as a token alone (where "Kassierer"
        read "Kaßierer" is "▁Ka", "ß", "ier", "er": fewer tokens, but no word)."""
        return not any(len(piece := t.lstrip("▁").lower()) == 1 and piece in letters
                       for t in self.tokens(word))


def missing_letters(sentence: str, vocab: Vocab) -> str:
    """The letters of :data:`SPELT` the source side has, where ``sentence`` has none of them
    (nor their capitals) but has a spelling of one (or a vowel without their marks);
    otherwise none."""
    letters = "".join(c for c in SPELT if c in vocab.letters)
    if not letters or any(c in sentence.lower() for c in letters):
        return ""
    lower = sentence.lower()
    return letters if any(s in lower for c in letters for s in _spelt(c)) else ""


def _spelt(letter: str, bare: bool = True) -> list[str]:
    return [SPELT[letter], *(BARE.get(letter, "") if bare else "")]


def spellings(word: str, letters: str, bare: bool = True) -> list[str]:
    """``word`` (first) and its readings with each of its first :data:`MOST_SPELLINGS`
    spellings of ``letters`` (``bare``: and their vowels without their marks) read as the
    letter or left ("Maedchen", "Madchen": "Mädchen"), the letter in the case of the
    spelling's first ("Aerger": "Ärger")."""
    spelt = {s for c in letters for s in _spelt(c, bare)}
    found = list(re.finditer("|".join(sorted(spelt, key=len, reverse=True)), word,
                             re.IGNORECASE))[:MOST_SPELLINGS] if spelt else []
    choices = [[m[0], *(c.upper() if m[0][0].isupper() else c for c in letters
                        if m[0].lower() in _spelt(c, bare))] for m in found]
    return [_put(word, found, chosen) for chosen in itertools.product(*choices)]


def _put(word: str, found: list[re.Match[str]], texts: Sequence[str]) -> str:
    """``word`` with each of ``found`` written as its text of ``texts``."""
    parts, end = [], 0
    for match, text in zip(found, texts, strict=True):
        parts += [word[end:match.start()], text]
        end = match.end()
    return "".join(parts) + word[end:]


def either_way(text: str) -> list[str]:
    """``text`` and its spellings with the letters of :data:`SPELT` written as the letters,
    spelt out or without their marks ("Straße": "Strasse"; "Mädchen": "Maedchen", "Madchen"),
    and with their spellings read as them ("Strasse": "Straße"): how a glossary's term matches
    a sentence typed either way and read either way."""
    found = list(re.finditer(f"[{''.join(SPELT)}]", text, re.IGNORECASE))[:MOST_SPELLINGS]
    choices = [[m[0], *(_cased(s, m[0]) for s in _spelt(m[0].lower()))] for m in found]
    return list(dict.fromkeys([*(_put(text, found, c) for c in itertools.product(*choices)),
                               *spellings(text, "".join(SPELT), bare=False)]))


def _cased(spelt: str, letter: str) -> str:
    """A letter's spelling in the letter's case ("Ä": "Ae")."""
    return spelt.capitalize() if letter.isupper() else spelt


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
    the most frequent ones) that reads each of its letters in a token with others (and, where
    a bare vowel is read as one, is one token: "halt" is not read "hält"), where it takes
    fewer tokens than ``word``; otherwise ``word``."""
    whole = [r for r in readings if reading.whole(r, letters) and (
        sum(c.lower() in letters for c in r) == len(word) - len(r)  # spellings read alone
        or len(reading.tokens(r)) == 1)]  # a bare letter read: only as a word the model has
    best = min(whole, key=reading.cost, default=word)
    return best if reading.cost(best)[0] < reading.cost(word)[0] else word


def words_read(sentence: str, read: Callable[[str], str]) -> str:
    """``sentence`` with each span between spaces read by ``read``, but those with a number, an
    address, a file name or a placeholder, and those without a letter."""
    def span(found: re.Match[str]) -> str:
        text = found.group()
        return text if KEPT.search(text) or not WORDS.search(text) else read(text)

    return SPANS.sub(span, sentence)
