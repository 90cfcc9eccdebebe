"""Words: spaCy's rule-based tokenizer, which splits them, and Moses' detokenizer (sacremoses),
which writes them back as text; :class:`tokenize.WordTokenizer` uses both.

spaCy splits a hyphen out of a word ("t-shirt": ``t``, ``-``, ``shirt``), as it splits a dash
between words ("outside - the"); the detokenizer could then only write both alike, "t - shirt".
So a hyphen inside a word is the token ``@-@`` (``data.mark_hyphens``), as Moses' tokenizer
marks it (``-a``), and the detokenizer joins the word again: "t-shirt".
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from transformer_mt.data.vocab import UNK
from transformer_mt.errors import DataError

# languages written without spaces between words: word tokens are joined without them
UNSPACED = ("zh", "ja", "th", "lo", "km", "my", "bo")
# a literal <unk> in a text is one word, the unknown one (as a model writes it without
# decode.replace_unk, and as older corpora hold it), not "<", "unk" and ">"; in the cache keys
WHOLE_WORDS = (UNK,)
HYPHEN = "@-@"  # a hyphen inside a word, as Moses marks it; written "-", joined to its word
# English endings spaCy splits off that Moses' detokenizer leaves spaced: "n't" ("do n't",
# "ca n't"), and any with a typographic apostrophe ("man ’s", "do n’t")
ENGLISH_ENDINGS = re.compile(r"(?<=\w) (n['’]t|’(?:s|m|re|ll|d|ve))\b", re.IGNORECASE)
# German's "’s" (an "es" elided, or a name's genitive), split off after a typographic
# apostrophe: "geht’s", "McDonald’s"
GERMAN_ENDING = re.compile(r"(?<=\w) ([’‘]s)\b")
# what spaCy splits off a word that is written joined to it: "#" before a number or a
# hashtag's word ("#19", "#summer"), a slash between two ("km/h", "Lehrer/innen"; a spaced one
# is rare)
JOINED = re.compile(r"(?<!\w)(#) (?=\w)|(?<=\w) (/) (?=\w)")
# a degree sign, which spaCy splits off its number and its scale ("25 ° C", "90 °"): a
# temperature written as SI writes it, "25 °C", an angle joined to its number, "90°"
TEMPERATURE = re.compile(r"(?<= )° ([CF])\b")
ANGLE = re.compile(r"(?<=[\d\ue000-\uf8ff]) °(?!\w)")  # (a number, or a kept span's stand-in)
# the languages that space "%" from its number, as Moses' rules write it for French only: German
# (DIN 5008, and Multi30k's German: "50 %")
SPACED_PERCENT = re.compile(r"(?<=[\d\ue000-\uf8ff])([%‰])")
# an English word whose start is elided ("'cause", "'em", "'til"), which Moses' rule for an
# ending ("'s", "'re", "'ll") would join to the word before: "It's'cause"
ENGLISH_ELIDED = re.compile(r"'(?!(?:s|m|re|ll|d|ve)$)[^\W\d_]\w*", re.IGNORECASE)
# an Italian word cut short ("un po' di", "mo'", "be'"): a vowel before its apostrophe, where a
# word elided before the next ("l'uomo", "dell'acqua", "un'ora") ends in a consonant; Moses'
# rule would join both to the word after
ITALIAN_CUT = re.compile(r"\w*[aeiouàèéìíòóùú]'", re.IGNORECASE)
# quotation marks Moses' detokenizer spaces as words (it places ASCII's '"', "„" and "“"): a
# family's marks alternate, opening then closing ("“hi”", "‚ja‘", "»Hallo«", Swedish "”hej”"),
# '"' among them (placed by Moses: '"Where are you?“ he asks'); a "’" that closes nothing is an
# apostrophe ("the students’ books"); ASCII's "'" (:data:`STRAIGHT` while Moses' rules run:
# they read "says 'hi'" as a possessive, "says' hi '") as :func:`_straight_quotes` says
STRAIGHT = "\ufdd1"
S_SOUND = re.compile(r"\w*[sxzß]", re.IGNORECASE)  # a word whose possessive is an apostrophe
# a letter, a digit or a kept span's stand-in (a private-use character: tokenize.MARKERS)
WORDLIKE = re.compile("[^\\W_]|[\ue000-\uf8ff]")
QUOTE_FAMILIES = ('"“”„‟', "‘’‚‛", "«»", "‹›", STRAIGHT)
FAMILY = {mark: family for family in QUOTE_FAMILIES for mark in family}
QUOTE_MARK = re.compile(f"([{''.join(FAMILY)}])")
SPACED_INSIDE = {"fr": "«»‹›"}  # French writes a space inside its guillemets: « oui »
# an apostrophe Moses' rules do not see: a noncharacter (U+FDD0, never in text), not one of
# the private-use ones that stand for kept spans while detokenizing (tokenize.MARKERS)
KEPT = "\ufdd0"


def spacy_tokenizer(lang: str) -> Any:
    """spaCy's rule-based tokenizer for ``lang``."""
    return spacy_pipeline(lang).tokenizer


@functools.lru_cache(maxsize=8)
def spacy_pipeline(lang: str) -> Any:
    """spaCy's blank pipeline for ``lang`` (made once): its tokenizer splits words, and the
    sentence splitter (``translate/documents.py``) adds a sentencizer to it, so that both share one
    vocabulary, and a word met by one is met by both."""
    import spacy  # imported lazily: spaCy takes a second to import

    try:
        nlp = spacy.blank(lang)
    except (ImportError, ValueError, OSError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataError(f"spaCy cannot tokenize '{lang}' here ({first}); install what it asks "
                        "for, or use data.tokenizer=sentencepiece") from exc
    tokenizer: Any = nlp.tokenizer
    if hasattr(tokenizer, "add_special_case"):  # rule-based (not Chinese's, Thai's, ...)
        for word in WHOLE_WORDS:
            tokenizer.add_special_case(word, [{"ORTH": word}])
    return nlp


def spacy_words(lang: str, texts: Iterable[str],
                mark_hyphens: bool = False) -> Iterator[list[str]]:
    """The words spaCy finds in each of ``texts`` (whitespace tokens dropped); with
    ``mark_hyphens``, a hyphen inside a word as :data:`HYPHEN` (where words are spaced)."""
    mark = mark_hyphens and lang not in UNSPACED
    for doc in spacy_tokenizer(lang).pipe(texts, batch_size=1000):
        if not mark:
            yield [t.text for t in doc if not t.is_space]
            continue
        words: list[str] = []
        for t in doc:
            if not t.is_space:
                words += marked(t) if "-" in t.text else [t.text]
        yield words


def marked(token: Any) -> list[str]:
    """The spaCy token ``token`` with a hyphen between a letter or digit and another, with no
    space on either side, as :data:`HYPHEN` of its own: a token of its own ("t-shirt": ``t``,
    ``-``, ``shirt``), or at the edge of one glued to its neighbour (French "dit-elle": ``dit``,
    ``-elle``); not "outside - the", "-5 degrees" or "well- known"."""
    doc, i, text = token.doc, token.i, token.text
    after = i > 0 and not doc[i - 1].whitespace_ and doc[i - 1].text[-1:].isalnum()
    before = i < len(doc) - 1 and not token.whitespace_ and doc[i + 1].text[:1].isalnum()
    if text == "-":
        return [HYPHEN] if after and before else [text]
    if text.startswith("-") and after and text[1].isalnum():
        return [HYPHEN, *marked_end(text[1:], before)]
    return marked_end(text, before)


def marked_end(text: str, before: bool) -> list[str]:
    """``text``, a token's, with its last character a hyphen glued to a word after it as
    :data:`HYPHEN` of its own."""
    return [text[:-1], HYPHEN] if before and text.endswith("-") and text[-2:-1].isalnum() \
        else [text]


def written(lang: str, tokens: Sequence[str]) -> str:
    """``tokens`` (words of ``lang``) as text: Moses' rules (``man 's`` becomes ``man's``,
    ``( x )`` becomes ``(x)``, :data:`HYPHEN` a hyphen joined to its word), English's
    :data:`ENGLISH_ENDINGS` joined to their words, :data:`JOINED` "#" and "/", a degree sign
    (:data:`TEMPERATURE`, :data:`ANGLE`), German's spaced "%", apostrophes
    its rules misread kept from them (:func:`_unruled`), and quotation marks joined to what
    they enclose (:func:`_quotes_placed`)."""
    given = [STRAIGHT if t == "'" else t for t in tokens]
    text = moses_detokenizer(lang).detokenize([_unruled(lang, t) for t in given])
    text = _quotes_placed(lang, given, text).replace(KEPT, "'").replace(STRAIGHT, "'")
    ending = {"en": ENGLISH_ENDINGS, "de": GERMAN_ENDING}.get(lang)
    text = JOINED.sub(lambda m: m[1] or m[2], ending.sub(r"\1", text) if ending else text)
    text = ANGLE.sub("°", TEMPERATURE.sub(r"°\1", text))
    return SPACED_PERCENT.sub(r" \1", text) if lang == "de" else text


def _unruled(lang: str, token: str) -> str:
    """``token`` with an apostrophe Moses' rules would misplace written :data:`KEPT`: an
    Italian word's cut short (:data:`ITALIAN_CUT`), an English word's elided start
    (:data:`ENGLISH_ELIDED`)."""
    if lang == "it" and ITALIAN_CUT.fullmatch(token):
        return token[:-1] + KEPT
    return KEPT + token[1:] if lang == "en" and ENGLISH_ELIDED.fullmatch(token) else token


def _quotes_placed(lang: str, tokens: Sequence[str], text: str) -> str:
    """``text``, ``tokens`` as Moses' rules wrote them, with each quotation mark of
    :data:`QUOTE_FAMILIES` that is a token of its own joined to what it encloses: an opening
    one to the word after it, a closing one (or an apostrophe) to the word before."""
    if not QUOTE_MARK.search(text):
        return text
    opening: list[bool | None] = []  # each mark's in the text, in order (None: in a word)
    opened = dict.fromkeys(QUOTE_FAMILIES, False)
    straight = iter(_straight_quotes(tokens))
    for token in tokens:
        for mark in (c for c in token if c in FAMILY):
            family = FAMILY[mark]
            if token != mark or mark in SPACED_INSIDE.get(lang, ""):
                opening.append(None)
            elif mark == STRAIGHT:
                opening.append(next(straight))
            else:
                opens = not opened[family] and mark != "’"
                opening.append(None if mark == '"' else opens)  # ('"': Moses placed it)
                opened[family] = opens
    if not any(role is not None for role in opening):
        return text
    pieces = QUOTE_MARK.split(text)  # text, a mark, text, ...
    for k, role in zip(range(1, len(pieces), 2), opening, strict=False):  # (the same count)
        if role:
            pieces[k + 1] = pieces[k + 1].lstrip(" ")
        elif role is not None:
            pieces[k - 1] = pieces[k - 1].rstrip(" ")
    return "".join(pieces)


def _straight_quotes(tokens: Sequence[str]) -> list[bool]:
    """Whether each :data:`STRAIGHT` token of ``tokens`` opens a quote (else it closes one, or
    is an apostrophe): one before a mark or the end closes, one after a mark or at the start
    opens; between two words, one after a word ending in an s sound is its apostrophe ("the
    dogs' toys", "Max' Hund") unless a quote closes later ("says 'free dinner'."), and any
    other opens a quote where another follows it ("said 'hi' to me"; else "Guck' mal"); one
    before a number is joined to it ("the '90s")."""
    at = [i for i, t in enumerate(tokens) if t == STRAIGHT]
    closes = [i + 1 == len(tokens) or not WORDLIKE.match(tokens[i + 1][:1]) for i in at]
    roles, opened = [], False
    for n, i in enumerate(at):
        before, after = i > 0 and WORDLIKE.match(tokens[i - 1][-1:]), closes[n] is False
        later = any(closes[n + 1:])  # a quote that closes later
        possessive = i > 0 and S_SOUND.fullmatch(tokens[i - 1]) is not None
        if after and tokens[i + 1][:1].isdigit():  # a year's apostrophe: "the '90s"
            roles.append(True)
            continue
        opens = after and (not before or (not opened and (
            later or (not possessive and n + 1 < len(at)))))
        roles.append(opens)
        opened = opens or (opened and after and possessive and later)  # (one inside quotes)
    return roles


@functools.lru_cache(maxsize=8)
def moses_detokenizer(lang: str) -> Any:
    """sacremoses' detokenizer for ``lang`` (made once); it writes :data:`HYPHEN` as "-" joined
    to the words on both sides."""
    from sacremoses import MosesDetokenizer  # imported lazily, like spaCy: training needs neither

    return MosesDetokenizer(lang=lang)
