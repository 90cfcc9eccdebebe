"""The private API of ReportLab that transformer_mt calls: its registry of fonts
(``reportlab.pdfbase.pdfmetrics._fonts`` and ``_dynFaceNames``, the family maps of
``reportlab.lib.fonts``), to let go of a font once no document draws with it. ReportLab has
no public way to: a font cut to a PDF's letters (``translate/pdf_fonts.py``, ~1 MiB for a
page of Chinese) would stay registered for the life of the process.

Tested on ReportLab 4.4, 4.5, 5.0 and 5.1. On any other version the fonts stay registered,
said once in a warning line: each translated PDF whose letters are cut grows the process by
its fonts.
"""

from __future__ import annotations

from transformer_mt.internals.versions import tested

TESTED = ("4.4", "4.5", "5.0", "5.1")


def forget(font_name: str) -> None:
    """Remove the font ReportLab knows as ``font_name`` from its registry (and the family
    ``registerFont`` made of it), where this ReportLab is one the registry was tested on."""
    if not tested("reportlab", TESTED, "letting go of PDF fonts cut to a document's letters",
                  "they stay in memory until the process ends"):
        return
    from reportlab.lib import fonts
    from reportlab.pdfbase import pdfmetrics

    font = pdfmetrics._fonts.pop(font_name, None)
    face = getattr(getattr(font, "face", None), "name", None)
    if face is not None and pdfmetrics._dynFaceNames.get(face) is font:
        del pdfmetrics._dynFaceNames[face]
    family = font_name.lower()
    for bold in (0, 1):
        for italic in (0, 1):
            fonts._tt2ps_map.pop((family, bold, italic), None)
    fonts._ps2tt_map.pop(family, None)
