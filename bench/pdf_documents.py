"""PDF documents: a test set's sentences as the paragraphs of a PDF (4 sentences a paragraph,
set in Helvetica and wrapped at a column's width, by ReportLab), translated as ``mt translate
--input FILE.pdf`` does (each paragraph read whole, its translation drawn in its place:
translate/pdf.py) against each of its lines translated alone (as argos-translate-files, what
LibreTranslate's ``/translate_file`` uses, translates a PDF's text spans).

    python bench/pdf_documents.py --checkpoint runs/cpu/avg.pt [--set test_2016_flickr]

Prints one JSON record: how many paragraphs, lines (``line_count``) and pages; BLEU and chrF
of the paragraphs' translations and of the lines translated alone, each against the
references joined alike; the sentences translated each alone (where a sentence without a
full stop runs into the next in a paragraph, it is read as one); ``ratio``: ours over the
lines', measured in the same run; and the seconds ours took. Asserts that the PDF's
paragraphs read back are the paragraphs the plain reader gives, and that the translated PDF
shows their translations.
"""

from __future__ import annotations

import io
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import on_a_test_set
from transformer_mt.evaluate import score
from transformer_mt.translate import Translator
from transformer_mt.translate.files import read_file, translate_file

SENTENCES = 4  # a paragraph's
WIDTH = 300  # points: a column's width
SIZE, LEADING = 11, 14


def document(paragraphs: list[str]) -> tuple[bytes, list[list[str]]]:
    """The PDF of ``paragraphs``, each wrapped at :data:`WIDTH` and a blank line apart, and
    each paragraph's lines."""
    from reportlab.lib.utils import simpleSplit
    from reportlab.pdfgen import canvas

    out, lines = io.BytesIO(), []
    page = canvas.Canvas(out)
    y = 780
    for paragraph in paragraphs:
        wrapped = simpleSplit(paragraph, "Helvetica", SIZE, WIDTH)
        if y - LEADING * len(wrapped) < 60:
            page.showPage()
            y = 780
        page.setFont("Helvetica", SIZE)
        for line in wrapped:
            page.drawString(72, y, line)
            y -= LEADING
        y -= LEADING
        lines.append(wrapped)
    page.save()
    return out.getvalue(), lines


def run(translator: Translator, sources: list[str], refs: list[str]) -> dict:
    from pdfminer.high_level import extract_text

    n = len(sources) // SENTENCES * SENTENCES or len(sources)
    groups = [range(i, min(i + SENTENCES, n)) for i in range(0, n, SENTENCES)]
    paragraphs = [" ".join(sources[i] for i in g) for g in groups]
    joined_refs = [" ".join(refs[i] for i in g) for g in groups]
    data, lines = document(paragraphs)
    lang = translator.config.data.tgt_lang
    assert [" ".join(d.sentences) for d in read_file("b.pdf", data, translator.config.data
                                                     .src_lang).documents] == paragraphs
    start = time.perf_counter()
    out = translate_file(translator, "bench.pdf", data)
    seconds = time.perf_counter() - start
    ours = translator.translate(paragraphs, form="text")  # what the paragraphs' texts give
    shown = extract_text(io.BytesIO(out))  # (a line may begin with a translation's "-")
    assert shown.split() == " ".join(ours).split(), "the PDF shows another text"
    plain = translator.translate(sources[:n], form="text")
    by_sentence = [" ".join(plain[i] for i in g) for g in groups]
    alone = iter(translator.translate([line for wrap in lines for line in wrap], form="text"))
    theirs = [" ".join(next(alone) for _ in wrap) for wrap in lines]
    from pypdf import PdfReader

    record: dict = {"paragraphs": len(paragraphs), "line_count": sum(map(len, lines)),
                    "pages": len(PdfReader(io.BytesIO(out)).pages)}
    for name, texts in (("ours", ours), ("lines", theirs), ("sentences", by_sentence)):
        s = score(texts, joined_refs, lang)
        record[name] = {"bleu": round(s.bleu, 2), "chrf": round(s.chrf, 2)}
    record["ours"]["seconds"] = round(seconds, 2)
    record["ratio"] = round(record["ours"]["bleu"] / record["lines"]["bleu"], 3) \
        if record["lines"]["bleu"] else None
    return record


def main() -> None:
    on_a_test_set("pdf_documents", __doc__.split("\n\n")[0], run)


if __name__ == "__main__":
    main()
