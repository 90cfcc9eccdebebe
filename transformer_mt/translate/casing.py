"""Sentences written all in capitals ("EIN HUND LÄUFT ÜBER DIE WIESE.": a headline, a sign),
all in lower case ("ein hund läuft über die wiese": typed in haste) or in title case ("Ein Hund
Läuft Über Die Wiese": a headline). A model trained on ordinary text has seen few such: in
capitals it reads rare pieces and writes nonsense, otherwise it misreads the words' case
(test_2016_flickr, the seed-1234 hour model of ``config/cpu.yaml``: BLEU 0.03 in capitals,
26.80 in lower case, 25.73 in title case, against 42.99 as written). So such a sentence is
read as it would be written (:func:`truecased`: each word in the case the model's own source
vocabulary spells it most readily, the first with a capital): 40.20, 39.94 and 39.90. A
translation of a sentence in capitals is written in capitals (:func:`as_shouted`); of the
others, as the model writes it.

A sentence is read so where it has a word of two letters or more and its letters are all of
one case, most of them cased ("Ein USA-Urlaub" and "我在IBM工作" are read as they are), or
three words or more each with a capital and the rest in lower case ("Zwei Hunde." is read as
it is); a word
the vocabulary spells most readily in capitals is written so ("USA"), and a span with a digit,
with a dot, a slash, an at sign, a colon or an underscore inside it, or with a bracket, a brace
or a percent sign (a number, an address, a file, a placeholder) is left as it is
("www.hund.de", "{name}").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from transformer_mt.data.tokenize import Tokenizer
from transformer_mt.data.vocab import Vocab
from transformer_mt.translate.glossary import KEPT as SPAN_KEPT
from transformer_mt.translate.spelling import (
    KEPT,
    SPANS,
    WORDS,
    Reading,
    better_spelt,
    missing_letters,
    respelt,
    spellings,
    words_read,
)

LONG_WORD = re.compile(r"[^\W\d_]{2,}")


def shouts(sentence: str) -> bool:
    """Whether ``sentence`` is written in capitals: a word of two letters or more, no
    lower-case letter, and capitals for most of its letters (a script without case, Chinese
    say, does not shout, nor does a Latin name in it: "我在IBM工作")."""
    return _one_case(sentence, str.isupper, str.islower)


def whispers(sentence: str) -> bool:
    """Whether ``sentence`` is written in lower case, as :func:`shouts` in capitals."""
    return _one_case(sentence, str.islower, str.isupper)


def titled(sentence: str) -> bool:
    """Whether ``sentence`` is written in title case, as headlines are ("Man Bites Dog In
    Park"): three words or more of two letters or more, each with a capital and the rest in
    lower case."""
    words = LONG_WORD.findall(sentence)
    return len(words) >= 3 and all(w[0].isupper() and w[1:].islower() for w in words)


def _one_case(sentence: str, case: Callable[[str], bool], other: Callable[[str], bool]
              ) -> bool:
    if LONG_WORD.search(sentence) is None or any(map(other, sentence)):
        return False
    letters = [c for c in sentence if c.isalpha()]
    return 2 * sum(map(case, letters)) > len(letters)


def truecased(sentence: str, reading: Reading, letters: str = "") -> str:
    """``sentence`` (in one case) as it would be written: each word in lower case, with a
    capital or in capitals, whichever the source side spells with the fewest tokens, unknown
    ones counted twice (then the most frequent: the lowest ids; lower case first on a tie;
    "SS" as "ß" too, and each spelling of the missing ``letters`` as the letter:
    ``spelling.py``); the first word with a capital unless that takes more tokens ("vert" of
    a corpus in lower case stays so); spans with a number, an address or a placeholder as
    they are, and each span kept whole (``glossary.KEPT``: a unit, "°C", "GB", with its
    number)."""
    cost = reading.cost

    def chosen(found: re.Match[str]) -> str:
        word = found.group().upper()
        forms = [word.lower(), word[:1] + word[1:].lower(), word]
        if "SS" in word:  # a ß is written SS in capitals ("STRASSE")
            forms += [form.replace("ss", "ß") for form in forms[:2]]
        return better_spelt(min(forms, key=cost),
                            (s for form in forms for s in spellings(form, letters)[1:]),
                            letters, reading)

    first = True

    def read(text: str) -> str:
        nonlocal first
        text = WORDS.sub(chosen, text)
        word = WORDS.search(text)
        if first and word is not None:
            first, capital = False, word[0][:1].upper() + word[0][1:]
            if cost(capital)[0] <= cost(word[0])[0]:
                text = text[:word.start()] + capital + text[word.end():]
        return text

    out, at = [], 0
    for kept in SPAN_KEPT.finditer(sentence):  # as it is: "30 °C", "32 GB" ("°c", "gb")
        out += [words_read(sentence[at:kept.start()], read), kept.group()]
        at = kept.end()
    return "".join([*out, words_read(sentence[at:], read)])


def as_read(sentences: Sequence[str], tokenizer: Tokenizer, vocab: Vocab) -> list[str]:
    """``sentences`` as the model reads them: those in one case or in title case truecased,
    those typed without their language's letters respelt (``spelling.py``), the others as
    they are."""
    reading = Reading(tokenizer, vocab)
    read = []
    for sentence in sentences:
        letters = missing_letters(sentence, vocab)
        if shouts(sentence) or whispers(sentence) or titled(sentence):
            sentence = truecased(sentence, reading, letters)
        else:
            sentence = capitalized(respelt(sentence, letters, reading) if letters
                                   else sentence, reading)
        read.append(sentence)
    return read


def capitalized(sentence: str, reading: Reading) -> str:
    """``sentence`` with its first word given a capital where it begins in lower case and
    that takes no more tokens ("ein Mann fährt Fahrrad": typed in haste; "iPhone", "und"
    where "Und" is rarer, and an address stay as typed)."""
    start = SPANS.search(sentence)
    if start is None or KEPT.search(start[0]):
        return sentence
    word = WORDS.search(sentence, start.start(), start.end())  # (after a quote, a bracket)
    if word is None or not word[0].islower() or any(
            c.isalnum() for c in sentence[start.start():word.start()]):
        return sentence
    capital = word[0][:1].upper() + word[0][1:]
    if reading.cost(capital)[0] > reading.cost(word[0])[0]:
        return sentence
    return sentence[:word.start()] + capital + sentence[word.end():]


def as_shouted(text: str) -> str:
    """A translation of a sentence in capitals, in capitals."""
    return text.upper()
