"""Kept numbers written as the target language writes them (translate/numbers.py): each
separator as CLDR (Babel) gives the target's, the number read by the source's rules; what those
rules do not read as a number (a time, a date, an address, digits grouped otherwise) as it is."""

from __future__ import annotations

import pytest

from transformer_mt.translate.glossary import KEPT
from transformer_mt.translate.numbers import bare_number, separators, writer, written

NNBSP, NBSP = "\u202f", "\u00a0"


@pytest.mark.parametrize(("source", "target", "cases"), [
    ("de", "en", {"1,75": "1.75", "1.000": "1,000", "1.000.000": "1,000,000",
                  "1 250 000": "1,250,000", f"1{NBSP}250{NBSP}000,50": "1,250,000.50",
                  "5,5-6,5": "5.5-6.5", "1,000": "1.000",  # (German's "1,000" is one)
                  "2021": "2021", "14:30": "14:30", "14.30": "14.30", "3.5.2021": "3.5.2021",
                  "2021-05-03": "2021-05-03", "192.168.0.1": "192.168.0.1", "1.5": "1.5",
                  "978-3-16-148410-0": "978-3-16-148410-0", "1/2": "1/2"}),
    ("en", "de", {"1,000.50": "1.000,50", "3.14": "3,14", "1,000": "1.000", "1.000": "1,000",
                  "1,5": "1,5", "10:30": "10:30"}),
    ("en", "fr", {"1,000.50": f"1{NNBSP}000,50", "2.5": "2,5"}),
    ("de", "fr", {"1.000,5": f"1{NNBSP}000,5", "0,5": "0,5"}),
])
def test_a_number_is_read_by_the_sources_rules_and_written_by_the_targets(source, target,
                                                                           cases):
    write = writer(source, target)
    assert write is not None
    assert {number: written(KEPT.fullmatch(number), write) for number in cases} == cases


@pytest.mark.parametrize(("source", "target", "cases"), [
    ("de", "en", {"12,50 €": "€12.50", "-5 €": "-€5", "−5 $": "−$5", "€ 3": "€3", "3 £": "£3",
                  "50 %": "50%", "-0,5 %": "-0.5%", "1.000 ¥": "¥1,000", "$5": "$5"}),
    ("en", "de", {"$5": "5 $", "-$5.50": "-5,50 $", "€ 3": "3 €", "50%": "50 %",
                  "1,000.50 €": "1.000,50 €"}),
    ("de", "nl", {"12,50 €": "€ 12,50", "-5 €": "€ -5", "50 %": "50%"}),
    ("de", "tr", {"50 %": "%50", "-5 %": "-%5", "12,50 €": "€12,50"}),
    ("de", "ar", {"12,50 €": "12.50 €", "-5 €": "-5 €"}),
])
def test_a_currencys_or_percent_sign_goes_where_the_target_language_puts_it(source, target,
                                                                             cases):
    """CLDR's pattern's place for the sign, before or after, with a space where it has one
    (the source's, else a plain one), a negative number's sign where its pattern has it."""
    write = writer(source, target)
    assert write is not None
    assert {span: written(KEPT.fullmatch(span), write) for span in cases} == cases


def test_a_sign_that_is_no_currencys_or_percent_stays_as_it_is():
    """Degrees, a unit, both sides a currency's, "%" on a word ("50%ige"), "#": as written;
    the number in it written as the target writes it."""
    write = writer("de", "en")
    text = "30 °C, 1,5 kg, $3 €, eine 50%ige, #19, -€-5"
    assert [written(m, write) for m in KEPT.finditer(text)] == [
        "30 °C", "1.5 kg", "$3 €", "50%", "#19", "-€-5"]


def test_languages_that_write_numbers_alike_or_that_babel_does_not_know_change_nothing():
    assert separators("de") == (",", ".") and separators("en") == (".", ",")
    assert separators("ar") == (".", ",")  # (Latin digits' separators, not Arabic's)
    assert writer("de", "da") is None and writer("en", "zh") is None
    assert separators("xx") is None and writer("de", "xx") is None


def test_a_kept_span_has_its_number_written_its_sign_currency_and_unit_as_they_are():
    write = writer("de", "en")
    text = "Es kostet 12,50 €, wiegt −1.250,5 kg, ruft +49 30 1234567 an: www.x.de/1,5"
    assert [written(m, write) for m in KEPT.finditer(text)] == [
        "€12.50", "−1,250.5 kg", "+49 30 1234567", "www.x.de/1,5"]
    assert [written(m, None) for m in KEPT.finditer(text)] == [
        m.group() for m in KEPT.finditer(text)]
    # a number as either language writes it, found in the other's
    assert bare_number("12,50 € und 1 000") == bare_number("12.50 € und 1,000")
    # a kept span whichever side its currency's or percent sign stands, spaced or not
    assert len({bare_number(span) for span in ("12,50 €", "€12.50", "€ 12,50", "12.50€")}) == 1
    assert len({bare_number(span) for span in ("-5 $", "-$5", "$ -5")}) == 1
    assert len({bare_number(span) for span in ("50 %", "%50", "50%")}) == 1
    assert bare_number("$5") != bare_number("5") != bare_number("€5")
