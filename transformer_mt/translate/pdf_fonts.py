"""The fonts a PDF's translation is drawn in (``pdf_writing.py``): PDF's standard Helvetica
where every letter is in Windows-1252 (nothing embedded), else an installed TrueType font that
has every letter of the translation (fontconfig's ``fc-list`` finds it, else a look through
the usual font folders; a sans-serif family first; the environment's ``MT_PDF_FONT`` names
one), embedded by ReportLab as the subset of
its letters the translation uses, with their widths and a map back to Unicode (the text can
be searched and copied). The family's bold and italic where it has them, else the regular
drawn thicker or slanted. Letters that are shaped (Arabic, Devanagari) or written right to
left are drawn by ``pdf_shaping.py``, which refuses what it cannot draw."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from transformer_mt.errors import MTError
from transformer_mt.translate.pdf_shaping import check

LOOKS = [(False, False), (True, False), (False, True), (True, True)]  # (bold, oblique)
STANDARD = dict(zip(LOOKS, ["Helvetica", "Helvetica-Bold", "Helvetica-Oblique",
                            "Helvetica-BoldOblique"], strict=True))
# families first where several have the letters (Liberation Sans and Arimo are Helvetica's
# widths); then any sans-serif, then the rest
PREFERRED = ("Liberation Sans", "Arimo", "Noto Sans", "DejaVu Sans", "FreeSans")
STYLES = {"regular": LOOKS[0], "book": LOOKS[0], "normal": LOOKS[0], "roman": LOOKS[0],
          "bold": LOOKS[1], "italic": LOOKS[2], "oblique": LOOKS[2],
          "bold italic": LOOKS[3], "bold oblique": LOOKS[3]}
CODEC = "mt_winansi"  # Windows-1252 under a name of its own (:func:`_standard`)
INSTALL = ("install one (Debian: fonts-noto-core; Chinese, Japanese, Korean: "
           "fonts-wqy-zenhei) or set MT_PDF_FONT to a TrueType font (.ttf) that has them")


@dataclass(frozen=True)
class Face:
    """A look's font as ReportLab names it, and whether it is drawn thicker (bold from a
    family without one) or slanted (its italic)."""

    name: str
    thicker: bool = False
    slanted: bool = False


def faces(name: str, text: str) -> dict[tuple[bool, bool], Face]:
    """Each look's face for a translation holding ``text`` (the module's docstring)."""
    ordered = list(dict.fromkeys(c for c in text if not c.isspace()))  # (as they come)
    letters = set(ordered)
    if all(_standard_has(c) for c in ordered):
        return _standard()
    check(name, text)
    files = _family(name, letters)
    out = {}
    for bold, oblique in LOOKS:
        have = [look for look in [(bold, oblique), (bold, False), (False, oblique), LOOKS[0]]
                if look in files]
        path, index = files[have[0]]
        out[(bold, oblique)] = Face(_registered(path, index),
                                    thicker=bold and not have[0][0],
                                    slanted=oblique and not have[0][1])
    return out


def _standard_has(letter: str) -> bool:
    try:
        letter.encode("cp1252")
        return True
    except UnicodeEncodeError:
        return False


@cache
def _standard() -> dict[tuple[bool, bool], Face]:
    """The standard fonts, their text in Windows-1252 as PDF's WinAnsiEncoding has it
    (ReportLab's own codec writes a bullet as code 127, which WinAnsi leaves unassigned: the
    text read back would lose it)."""
    import codecs

    from reportlab.pdfbase import pdfmetrics

    codecs.register(lambda name: codecs.lookup("cp1252") if name == CODEC else None)
    pdfmetrics.registerEncoding(pdfmetrics.Encoding(CODEC, "WinAnsiEncoding"))
    for font in STANDARD.values():
        pdfmetrics.registerFont(pdfmetrics.Font(f"MT-{font}", font, CODEC))
    return {look: Face(f"MT-{font}") for look, font in STANDARD.items()}


def _family(name: str, letters: set[str]) -> dict[tuple[bool, bool], tuple[str, int]]:
    """The files (and index in a collection) of each look an installed family has, of the
    first family whose fonts have every one of ``letters`` (or ``MT_PDF_FONT``'s file)."""
    chosen = os.environ.get("MT_PDF_FONT")
    if chosen:
        return {LOOKS[0]: (_chosen(name, letters, chosen), 0)}
    shown = "".join(sorted(c for c in letters if not _standard_has(c)))[:3]
    families: dict[str, dict[tuple[bool, bool], tuple[str, int]]] = {}
    for path, index, family, style in sorted(_listed(letters)):
        if style.lower() in STYLES:
            families.setdefault(family, {}).setdefault(STYLES[style.lower()], (path, index))
    found = sorted((f for f in families if LOOKS[0] in families[f]), key=_preference)
    if not found:
        raise MTError(f"'{name}': no installed TrueType font has every letter of the "
                      f"translation ({shown!r}... are outside PDF's standard fonts): {INSTALL}")
    return families[found[0]]


def _chosen(name: str, letters: set[str], chosen: str) -> str:
    """``MT_PDF_FONT``'s file, where it has every one of ``letters``; else a one-line error."""
    from reportlab.pdfbase import pdfmetrics

    if not os.path.isfile(chosen):
        raise MTError(f"MT_PDF_FONT: no such font file '{chosen}'")
    cmap = pdfmetrics.getFont(_registered(chosen, 0)).face.charToGlyph
    lacking = sorted(c for c in letters if ord(c) not in cmap)
    if lacking:
        raise MTError(f"'{name}': the font MT_PDF_FONT names ('{chosen}') has no "
                      f"{lacking[0]!r}, which the translation holds")
    return chosen


def _listed(letters: set[str]) -> list[tuple[str, int, str, str]]:
    """The installed TrueType fonts that have every one of ``letters``: (file, index in a
    collection, family, style); fontconfig's, else those of the usual folders."""
    codes = sorted(ord(c) for c in letters)
    ranges: list[list[int]] = []
    for code in codes:
        if ranges and code == ranges[-1][1] + 1:
            ranges[-1][1] = code
        else:
            ranges.append([code, code])
    charset = " ".join(f"{a:x}" if a == b else f"{a:x}-{b:x}" for a, b in ranges)
    try:
        listed = subprocess.run(["fc-list", "--format", "%{file}\t%{index}\t%{family[0]}\t"
                                 "%{style[0]}\t%{fontformat}\n", f":charset={charset}"],
                                capture_output=True, text=True, check=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):  # (no fontconfig: macOS, Windows)
        return [font for font, has in _scanned() if set(codes) <= has]
    rows = [line.split("\t") for line in listed.splitlines()]
    # (an index past 65535 is a variable font's named style, which ReportLab cannot draw)
    return [(r[0], int(r[1] or 0), r[2], r[3]) for r in rows
            if len(r) == 5 and r[4] == "TrueType" and int(r[1] or 0) < 2**16]


def font_folders() -> list[Path]:
    """Where fonts are installed: Linux's, macOS's and Windows' folders."""
    home = Path.home()
    return [Path("/usr/share/fonts"), Path("/usr/local/share/fonts"), home / ".fonts",
            home / ".local/share/fonts", Path("/System/Library/Fonts"),
            Path("/Library/Fonts"), home / "Library/Fonts",
            Path(os.environ.get("WINDIR", "C:\\Windows")) / "Fonts"]


@cache
def _scanned() -> list[tuple[tuple[str, int, str, str], frozenset[int]]]:
    """Each TrueType font of :func:`font_folders` (each of a collection's): (file, index,
    family, style) and the letters it has (read once a process: ~2 ms a font)."""
    from reportlab.pdfbase.ttfonts import TTFError, TTFontFile

    out = []
    for folder in font_folders():
        paths = sorted(p for p in folder.rglob("*") if p.suffix.lower() in
                       (".ttf", ".ttc", ".otf")) if folder.is_dir() else []
        for path in paths:
            for index in range(32 if path.suffix.lower() == ".ttc" else 1):
                try:
                    font = TTFontFile(str(path), subfontIndex=index)
                except (OSError, TTFError, IndexError, KeyError, ValueError):
                    break  # (not a TrueType font, or no more in the collection)
                out.append(((str(path), index, font.familyName.decode(errors="replace"),
                             font.styleName.decode(errors="replace")),
                            frozenset(font.charToGlyph)))
    return out


def _preference(family: str) -> tuple[int, bool, str]:
    """The order families are chosen in: :data:`PREFERRED`, then sans-serif ones."""
    rank = PREFERRED.index(family) if family in PREFERRED else len(PREFERRED)
    return rank, not ("Sans" in family and "Mono" not in family), family


@cache
def _registered(path: str, index: int) -> str:
    """The name ReportLab draws the font of ``path`` (``index`` in a collection) by."""
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.ttfonts import TTFError, TTFont

    font_name = f"MT-{os.path.basename(path)}-{index}"
    try:
        pdfmetrics.registerFont(TTFont(font_name, path, subfontIndex=index))
    except (OSError, TTFError) as exc:
        raise MTError(f"the font '{path}' cannot be embedded in a PDF: {exc}") from None
    return font_name
