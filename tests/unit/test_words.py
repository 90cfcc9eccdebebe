"""Words (``data/words.py``): spaCy splits them, Moses' detokenizer writes them back; a hyphen
inside a word is marked (``@-@``, ``data.mark_hyphens``), so that a word model's translation
writes the word whole ("t-shirt"), where a plain hyphen is written spaced; English endings
spaCy splits off ("do", "n't") are written joined."""

from __future__ import annotations

import pytest

from transformer_mt.data.tokenize import WordTokenizer
from transformer_mt.data.words import HYPHEN

SENTENCES = [  # each sentence, and the tokens of it that hold a hyphen, marked
    ("en", "A man in a t-shirt and a red-haired girl.", [HYPHEN, HYPHEN]),
    ("en", "Two dogs - one brown - play.", ["-", "-"]),  # a dash between words stays one
    ("en", "An X-ray of a 2-3 year-old co-op.", [HYPHEN] * 4),
    ("en", "It is -5 degrees at a well- known place, pre- and post-war.",
     ["-5", "well-", "pre-", HYPHEN]),  # not between two words
    # French: spaCy glues a hyphen to the pronoun after a verb ("dit", "-elle")
    ("fr", "« Oui », dit-elle. Y a-t-il un chat, n'est-ce pas ?", [HYPHEN] * 4),
    ("de", "Die E-Mail-Adresse, 2-3 Hunde.", ["E-Mail-Adresse", HYPHEN]),  # one word in German
]


@pytest.mark.parametrize("lang, sentence, hyphens", SENTENCES)
def test_a_word_split_at_its_hyphen_is_written_whole_again(lang, sentence, hyphens):
    marked, plain = WordTokenizer(lang, mark_hyphens=True), WordTokenizer(lang)
    tokens = next(marked.tokenize([sentence]))
    assert [t for t in tokens if "-" in t] == hyphens
    assert marked.detokenize(tokens) == sentence
    # the same words as unmarked, but for the hyphens split off
    assert "".join(t for t in tokens if t != HYPHEN) == "".join(
        t.replace("-", "") if "-" in t and t not in hyphens else t
        for t in next(plain.tokenize([sentence])))
    assert marked.key != plain.key  # token ids cached for one are not read for the other


def test_unmarked_as_checkpoints_made_before_the_mark_the_word_came_out_in_three():
    plain = WordTokenizer("en")
    assert plain.detokenize(next(plain.tokenize(["A man in a t-shirt."]))) == \
        "A man in a t - shirt."


def test_languages_written_without_spaces_are_not_marked():
    chinese = WordTokenizer("zh", mark_hyphens=True)
    tokens = next(chinese.tokenize(["T-shirt很好"]))
    assert HYPHEN not in tokens and chinese.detokenize(tokens) == "T-shirt很好"


@pytest.mark.parametrize("sentence", [
    "I can't, won't, don't know: they aren't here.", "DON'T GO!",
    "I don’t know the man’s dog; we’re sure you’ll see.",
    "He said 'stop' and 'don't'.", "I'm sure you're right, they'd go, I've."])
def test_english_endings_split_off_are_written_joined(sentence):
    """spaCy splits "don't" into "do" and "n't", which Moses' detokenizer wrote spaced, as
    every ending after a typographic apostrophe ("man ’s")."""
    english = WordTokenizer("en")
    tokens = next(english.tokenize([sentence]))
    assert english.detokenize(tokens) == sentence


@pytest.mark.parametrize("lang, sentence", [
    ("it", "Vorrei un po' di acqua, un po'."),  # cut short: spaced from the next word
    ("it", "Perché l'ha fatto? Un'ora dell'acqua."),  # elided: joined to it
    ("fr", "L'homme qu'il a vu."),
    ("de", "Das ist Hans' Auto."),  # German's apostrophe after an s sound (a lone one)
    ("de", "Er sagte 'Hallo' zu Hans."),  # and quotes
])
def test_apostrophes_are_written_where_they_were(lang, sentence):
    """Moses' detokenizer joins every Italian word ending in an apostrophe to the next, as it
    does an elided one ("l'uomo"): "un po'di"; and reads German's lone apostrophe after a
    name as an opening quote: "Hans 'Auto"."""
    words = WordTokenizer(lang)
    assert words.detokenize(next(words.tokenize([sentence]))) == sentence


@pytest.mark.parametrize("lang, sentence, kept", [
    ("it", "Un po' di https://x.org/a-b oggi.", "https://x.org/a-b"),
    ("de", "Hans' Auto kostet 12,50 € heute.", "12,50 €"),
    ("en", "A man's site is https://x.org/a-b today.", "https://x.org/a-b"),
    ("en", "He said '12,50 €' twice.", "12,50 €"),  # (a quote's word the span)
    ("en", "Visit 'https://x.org/a-b' now.", "https://x.org/a-b")])
def test_a_kept_span_is_written_as_it_is_beside_the_apostrophes(lang, sentence, kept):
    """A span written as its text (a URL kept, a glossary's term: ``detokenize_keeping``)
    stands in a character of its own while the words are detokenized, not one the
    apostrophes' rules write as "'"."""
    words = WordTokenizer(lang)
    tokens = next(words.tokenize([sentence]))
    start = next(i for i in range(len(tokens)) if "".join(tokens[i:]).startswith(
        kept.replace(" ", "")))
    end = start + len(next(words.tokenize([kept])))
    assert words.detokenize_keeping(tokens, [(start, end, kept)]) == sentence


@pytest.mark.parametrize("lang, sentence", [
    ("en", "He said “hi, there”, then left."),
    ("en", "“She said ‘no’ to the students’ teacher.”"),  # nested; an apostrophe
    ("de", "Er sagt »Hallo«, sie sagt ‚ja‘ und „nein“."),
    ("sv", "Han sa ”hej” till mig."),  # the same mark opening and closing
    ("it", "Ha detto «ciao» a tutti."),
    ("pl", "Powiedział: „Cześć!”"),
    ("fr", "Il a dit « bonjour » et “salut”."),  # French's guillemets spaced inside
    ("en", "A sign that says 'free dinner' and Michael Jackson's 'Thriller'."),
    ("en", "The boss' 'yes' came."),  # an apostrophe after an s
    ("en", "The dogs' toys, the cats' beds, all 'cause of the '90s."),  # apostrophes only
    ("en", "He said, 'It's the boss' car.'"),  # an apostrophe inside quotes
    ("de", "Er sagte 'Hallo' zu Max' Hund."),
])
def test_quotation_marks_hold_what_they_enclose(lang, sentence):
    """Moses' detokenizer places '"' and German's „“ only: a typographic quote was written as a
    word of its own ("He said “hi ”", "« ciao »"), and its rule for "'" after an s, a
    possessive's, misread quotes: "says' free dinner '"."""
    words = WordTokenizer(lang)
    assert words.detokenize(next(words.tokenize([sentence]))) == sentence


@pytest.mark.parametrize("lang, sentence", [
    ("en", "The #19 player (#5's friend) loves #summer at 30 km/h."),
    ("de", "Die Lehrer/innen fahren 30 km/h, er/sie auch."),
])
def test_a_number_sign_and_a_slash_are_joined_to_their_words(lang, sentence):
    """spaCy splits "#" off a number and a hashtag's word, and a slash out of "km/h": "The #
    19 player", "30 km / h"."""
    words = WordTokenizer(lang)
    assert words.detokenize(next(words.tokenize([sentence]))) == sentence


@pytest.mark.parametrize("lang, sentence", [
    ("en", "It was 25 °C (77 °F) at noon, 50% more than at -5 °C; a 90° turn."),
    ("de", "Es waren 25 °C und 50 % (nicht 5,5 %) der Leute drehten sich um 180°."),
    ("fr", "Il fait 25 °C et 50 % des gens."),
])
def test_degrees_and_percent_are_written_as_the_language_writes_them(lang, sentence):
    """spaCy splits "°" off its number and its scale ("25 ° C", "90 °"), which Moses' rules
    left so; and they join "%" to its number in every language but French: German's "50%"."""
    words = WordTokenizer(lang)
    assert words.detokenize(next(words.tokenize([sentence]))) == sentence
