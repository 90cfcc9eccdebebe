"""Sentences written in capitals ("EIN HUND LÄUFT ÜBER DIE WIESE."): a headline, a sign, a
warning. A model trained on ordinary text has seen few: it reads them as rare pieces and
writes nonsense (test_2016_flickr's first 300 sentences in capitals: BLEU 0.04 against 43.85 as
written, the seed-1234 hour model of ``config/cpu.yaml``). So such a sentence is read as it
would be written (:func:`truecased`: each word in the case the model's own source vocabulary
spells it most readily) and its translation written in capitals again (:func:`as_shouted`):
39.59 there, and sentence case alone 29.01 (German's nouns lose their capitals).

A sentence shouts where it has a word of two letters or more, no lower-case letter and most
of its letters capitals ("Ein USA-Urlaub" and "我在IBM工作" are read as they are); a word the
vocabulary spells most readily in capitals stays in capitals ("USA").
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from transformer_mt.data.tokenize import Tokenizer
from transformer_mt.data.vocab import Vocab

WORDS = re.compile(r"[^\W\d_]+")  # runs of letters: the words whose case is chosen
LONG_WORD = re.compile(r"[^\W\d_]{2,}")


def shouts(sentence: str) -> bool:
    """Whether ``sentence`` is written in capitals: a word of two letters or more, no
    lower-case letter, and capitals for most of its letters (a script without case, Chinese
    say, does not shout, nor does a Latin name in it: "我在IBM工作")."""
    if LONG_WORD.search(sentence) is None or any(c.islower() for c in sentence):
        return False
    letters = [c for c in sentence if c.isalpha()]
    return 2 * sum(c.isupper() for c in letters) > len(letters)


def truecased(sentence: str, tokenizer: Tokenizer, vocab: Vocab) -> str:
    """``sentence`` (in capitals) as it would be written: each word in lower case, with a
    capital or in capitals, whichever the source side spells with the fewest tokens (then the
    most frequent: the lowest ids; lower case first on a tie), the first word's first letter a
    capital."""
    def cost(word: str) -> tuple[int, int]:
        tokens = next(tokenizer.tokenize([word]))
        return len(tokens), max((vocab.stoi.get(t, len(vocab)) for t in tokens), default=0)

    def chosen(found: re.Match[str]) -> str:
        word = found.group()
        forms = [word.lower(), word[:1] + word[1:].lower(), word]
        if "SS" in word:  # a ß is written SS in capitals ("STRASSE")
            forms += [form.replace("ss", "ß") for form in forms[:2]]
        return min(forms, key=cost)

    read = WORDS.sub(chosen, sentence)
    first = WORDS.search(read)
    if first is None:
        return read
    at = first.start()
    return read[:at] + read[at].upper() + read[at + 1:]


def as_read(sentences: Sequence[str], tokenizer: Tokenizer, vocab: Vocab) -> list[str]:
    """``sentences`` as the model reads them: those in capitals truecased, the others as
    they are."""
    return [truecased(s, tokenizer, vocab) if shouts(s) else s for s in sentences]


def as_shouted(text: str) -> str:
    """A translation of a sentence in capitals, in capitals."""
    return text.upper()
