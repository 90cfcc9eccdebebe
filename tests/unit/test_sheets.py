"""Excel workbooks (translate/sheets.py through files.read_file): every string of every sheet,
rich text and comments translated, read back by openpyxl (what Python reads workbooks with);
numbers, dates, formulas, sheet names, styles and every other part as they were."""

from __future__ import annotations

import datetime
import io
import re
import zipfile

import pytest

openpyxl = pytest.importorskip("openpyxl")
pytest.importorskip("lxml")

from openpyxl.cell.rich_text import CellRichText, TextBlock  # noqa: E402
from openpyxl.cell.text import InlineFont  # noqa: E402
from openpyxl.chart import BarChart, Reference  # noqa: E402
from openpyxl.comments import Comment  # noqa: E402

from tests.helpers import billion_laughs  # noqa: E402
from transformer_mt.errors import MTError  # noqa: E402
from transformer_mt.translate.documents import translate_split  # noqa: E402
from transformer_mt.translate.files import read_file  # noqa: E402


def workbook() -> bytes:
    """Two sheets: strings (one in two cells, one with spaces around it, one in rich text
    with a bold word), a number, a formula, a date, a comment, a literal "_x0041_", a chart
    with a title."""
    book = openpyxl.Workbook()
    animals = book.active
    animals.title = "Tiere"
    animals["A1"], animals["B1"], animals["C1"] = "Ein Hund läuft.", 42, "=B1*2"
    animals["A2"] = CellRichText(["Ein Mann fährt ", TextBlock(InlineFont(b=True), "Fahrrad"),
                                  ". Zwei Hunde spielen."])
    animals["A3"], animals["B3"] = "  Zwei Katzen  ", datetime.datetime(2026, 12, 1)
    animals["A4"], animals["A5"] = "Ein Hund läuft.", "Code _x0041_ hier"
    animals["A1"].font = openpyxl.styles.Font(italic=True)
    numbers = book.create_sheet("Zahlen")
    numbers["A1"] = "Eine Frau liest ein Buch."
    numbers["A1"].comment = Comment("Bitte prüfen.", "Anna")
    numbers["A2"], numbers["B2"] = "Hund", 3
    chart = BarChart()
    chart.title = "Tiere im Garten"
    chart.add_data(Reference(numbers, min_col=2, min_row=2, max_row=2))
    numbers.add_chart(chart, "D2")
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def shared(data: bytes) -> bytes:
    """``data`` with its strings shared, as Excel writes them (openpyxl writes each in its
    cell): each cell's ``<is>`` an ``<si>`` of ``xl/sharedStrings.xml``, the cell its index."""
    book, strings, members = zipfile.ZipFile(io.BytesIO(data)), [], {}

    def index(found: re.Match) -> str:
        strings.append(f"<si>{found[2]}</si>")
        return f'{found[1]} t="s"><v>{len(strings) - 1}</v></c>'

    for name in book.namelist():
        members[name] = book.read(name)
        if name.startswith("xl/worksheets/sheet"):
            members[name] = re.sub(r'(<c [^>]*?) t="inlineStr"><is>(.*?)</is></c>', index,
                                   members[name].decode()).encode()
    main = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
    members["xl/sharedStrings.xml"] = f'<sst xmlns="{main}">{"".join(strings)}</sst>'.encode()
    members["[Content_Types].xml"] = members["[Content_Types].xml"].replace(b"</Types>", (
        b'<Override PartName="/xl/sharedStrings.xml" ContentType="application/vnd.openxml'
        b'formats-officedocument.spreadsheetml.sharedStrings+xml"/></Types>'))
    members["xl/_rels/workbook.xml.rels"] = members["xl/_rels/workbook.xml.rels"].replace(
        b"</Relationships>", b'<Relationship Id="rIdS" Type="http://schemas.openxmlformats.org/'
        b'officeDocument/2006/relationships/sharedStrings" Target="sharedStrings.xml"/>'
        b"</Relationships>")
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for name, member in members.items():
            z.writestr(name, member)
    return out.getvalue()


def translated(data: bytes) -> bytes:
    doc = read_file("tiere.xlsx", data, "de")
    return doc.rebuild(translate_split(doc.documents, lambda s: [x.upper() for x in s]))


@pytest.mark.parametrize("strings", ["inline", "shared"])
def test_every_string_is_translated_and_everything_else_stays(strings):
    source = workbook() if strings == "inline" else shared(workbook())
    if strings == "shared":  # (openpyxl reads it as it reads Excel's)
        assert openpyxl.load_workbook(io.BytesIO(source))["Tiere"]["A4"].value == "Ein Hund läuft."
    out = translated(source)
    book = openpyxl.load_workbook(io.BytesIO(out), rich_text=True)
    theirs = openpyxl.load_workbook(io.BytesIO(source), rich_text=True)
    assert book.sheetnames == ["Tiere", "Zahlen"]
    animals = book["Tiere"]
    assert [animals["A1"].value, animals["B1"].value, animals["C1"].value] == [
        "EIN HUND LÄUFT.", 42, "=B1*2"]
    assert animals["A1"].font.italic and animals["A4"].value == "EIN HUND LÄUFT."
    rich = animals["A2"].value
    assert isinstance(rich, CellRichText) and str(rich) == "EIN MANN FÄHRT FAHRRAD. ZWEI " \
        "HUNDE SPIELEN."
    bold = [part for part in rich if isinstance(part, TextBlock) and part.font.b]
    assert len(bold) == 1 and bold[0].text.strip()  # the bold word: still bold, a word in it
    assert animals["A3"].value == "  ZWEI KATZEN  " and animals["B3"].value == theirs[
        "Tiere"]["B3"].value
    assert animals["A5"].value == "CODE _X0041_ HIER"  # as written, not "A"
    note = book["Zahlen"]["A1"].comment
    assert book["Zahlen"]["A1"].value == "EINE FRAU LIEST EIN BUCH." and note.author == "Anna"
    assert "BITTE PRÜFEN." in note.text
    ours, before = zipfile.ZipFile(io.BytesIO(out)), zipfile.ZipFile(io.BytesIO(source))
    assert ours.namelist() == before.namelist()
    changed = [m for m in before.namelist() if ours.read(m) != before.read(m)]
    assert changed == ["xl/worksheets/sheet1.xml", "xl/worksheets/sheet2.xml",
                       "xl/comments/comment1.xml", "xl/charts/chart1.xml"] if strings == \
        "inline" else ["xl/comments/comment1.xml", "xl/charts/chart1.xml",
                       "xl/sharedStrings.xml"]  # (the sheets, the drawing: as they were)
    chart = ours.read("xl/charts/chart1.xml").decode()
    assert "<a:t>TIERE IM GARTEN</a:t>" in chart and "<f>'Zahlen'!$B$2</f>" in chart


def test_what_is_not_a_workbook_is_refused_in_a_line():
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("a.txt", "x")
    for data in (b"PK\x03\x04 not a zip", out.getvalue()):
        with pytest.raises(MTError, match=r"is not an Excel workbook \(\.xlsx\)"):
            read_file("tiere.xlsx", data, "de")


def test_an_entity_bomb_in_a_workbook_is_not_expanded():
    laughs = billion_laughs('<sst xmlns="http://schemas.openxmlformats.org/spreadsheetml/'
                            '2006/main"><si><t>&lol9;</t></si><si><t>Ein Hund.</t></si></sst>')
    book = zipfile.ZipFile(io.BytesIO(shared(workbook())))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for name in book.namelist():
            z.writestr(name, laughs if name == "xl/sharedStrings.xml" else book.read(name))
    try:
        doc = read_file("laughs.xlsx", out.getvalue(), "de")
        sentences = [s for d in doc.documents for s in d.sentences]
        assert "Ein Hund." in sentences and all(len(s) < 1000 for s in sentences)
    except MTError as exc:
        assert "is not an Excel workbook" in str(exc)
