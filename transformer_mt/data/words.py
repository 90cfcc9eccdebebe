"""Words: spaCy's rule-based tokenizer, which splits them, and Moses' detokenizer (sacremoses),
which writes them back as text; :class:`tokenize.WordTokenizer` uses both.

spaCy splits a hyphen out of a word ("t-shirt": ``t``, ``-``, ``shirt``), as it splits a dash
between words ("outside - the"); the detokenizer could then only write both alike, "t - shirt".
So a hyphen inside a word is the token ``@-@`` (``data.mark_hyphens``), as Moses' tokenizer
marks it (``-a``), and the detokenizer joins the word again: "t-shirt".
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from typing import Any

from transformer_mt.data.vocab import UNK
from transformer_mt.errors import DataError

# languages written without spaces between words: word tokens are joined without them
UNSPACED = ("zh", "ja", "th", "lo", "km", "my", "bo")
# a literal <unk> in a text is one word, the unknown one (as a model writes it without
# decode.replace_unk, and as older corpora hold it), not "<", "unk" and ">"; in the cache keys
WHOLE_WORDS = (UNK,)
HYPHEN = "@-@"  # a hyphen inside a word, as Moses marks it; written "-", joined to its word


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
        yield [HYPHEN if mark and t.text == "-" and inside_word(t) else t.text
               for t in doc if not t.is_space]


def inside_word(token: Any) -> bool:
    """Whether the spaCy token ``token`` stands between a letter or digit and another, with
    no space on either side ("t-shirt", "2-3"; not "outside - the", "-5" or "well-")."""
    doc, i = token.doc, token.i
    return (0 < i < len(doc) - 1 and not token.whitespace_ and not doc[i - 1].whitespace_
            and doc[i - 1].text[-1:].isalnum() and doc[i + 1].text[:1].isalnum())


@functools.lru_cache(maxsize=8)
def moses_detokenizer(lang: str) -> Any:
    """sacremoses' detokenizer for ``lang`` (made once); it writes :data:`HYPHEN` as "-" joined
    to the words on both sides."""
    from sacremoses import MosesDetokenizer  # imported lazily, like spaCy: training needs neither

    return MosesDetokenizer(lang=lang)
