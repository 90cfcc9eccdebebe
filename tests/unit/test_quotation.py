"""Quotation marks we place, written as the target language writes them
(``translate/quotation.py``): CLDR's marks by their role in the source language, or by where
they stand where that does not say."""

from __future__ import annotations

import pytest

from tests.helpers import REPO
from transformer_mt.translate.documents import split_text
from transformer_mt.translate.long_sentences import fitted
from transformer_mt.translate.quotation import delimiters, in_style


def styled(text: str, source: str, target: str) -> str:
    return in_style(text, range(len(text)), source, target)


def test_the_table_is_cldrs_for_the_languages_it_names():
    assert [delimiters(lang) for lang in ("en", "de", "fr", "ja", "sv", "ru")] == [
        "“”‘’", "„“‚‘", "«»«»", "「」『』", "””’’", "«»„“"]
    assert delimiters("de-CH") == delimiters("de_AT") == delimiters("DE") == "„“‚‘"
    assert delimiters("xx") is None
    assert (REPO / "scripts" / "quotation_marks.py").is_file()  # (what made it)


@pytest.mark.parametrize(("text", "source", "target", "expected"), [
    ("Er sagt „Ja, ‚gut‘.“", "de", "en", "Er sagt “Ja, ‘gut’.”"),  # by German's roles
    ("He says “yes, ‘fine’.”", "en", "de", "He says „yes, ‚fine‘.“"),
    ("He says “yes”", "en", "fr", "He says «yes»"),
    ("„Ein Hund.“", "de", "ja", "「Ein Hund.」"),
    ("Er sagt »Ja« und ‹nein›.", "de", "en", "Er sagt “Ja” und ‘nein’."),  # by place
    ("Han säger ”ja” (”nej”).", "sv", "en", "Han säger “ja” (“nej”)."),  # (” opens, closes)
    ("Er sagt \"Ja\" und 'nein'.", "de", "en", "Er sagt \"Ja\" und 'nein'."),  # straight
    ("„Ein Hund.“", "de", "xx", "„Ein Hund.“"),  # a language CLDR lacks: as it is
    ("„Ein Hund.“", "de", "cs", "„Ein Hund.“"),  # Czech writes them as German does
])
def test_each_mark_is_written_as_the_target_writes_its_role(text, source, target, expected):
    assert styled(text, source, target) == expected


def test_only_the_marks_asked_for_change():
    text = "„Ja“ und „Nein“"
    assert in_style(text, [0, 3], "de", "en") == "“Ja” und „Nein“"


def test_a_sentence_in_quotes_gets_the_targets_around_its_translation():
    [doc] = fitted([split_text("„Ein Hund läuft.“ Er sagt: „Ja.“", "de")],
                   lambda texts: [True] * len(texts), langs=("de", "en"))
    assert doc.sentences == ["Ein Hund läuft.", "Er sagt: „Ja.“"]
    # (a quotation inside a sentence is the model's to write)
    assert doc.rebuild(["A dog runs.", "He says: “Yes.”"]) == "“A dog runs.” He says: “Yes.”"
