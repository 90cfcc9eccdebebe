"""The fonts a PDF's translation is drawn in (``pdf_writing.py``): PDF's standard Helvetica
where every letter is in Windows-1252 (nothing embedded), else an installed font that has
every letter of the translation (fontconfig's ``fc-list`` finds it, else a look through the
usual font folders; a sans-serif family first, for Chinese, Japanese and Korean the family
made for the target's region: Noto Sans CJK SC for ``zh``, JP for ``ja``; the environment's
``MT_PDF_FONT`` names one), embedded by ReportLab as the subset of its letters the
translation uses, with their widths and a map back to Unicode (the text can be searched and
copied). ReportLab embeds TrueType outlines only: a font of CFF outlines (OpenType's
``.otf``, Noto Sans CJK's ``.ttc``) is cut to the translation's letters and its curves
turned into TrueType's by fontTools first. The family's bold and italic where it has them,
else the regular drawn thicker or slanted. Letters that are shaped (Arabic, Devanagari) or
written right to left are drawn by ``pdf_shaping.py``, which refuses what it cannot draw."""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import threading
from collections import Counter, OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from transformer_mt.errors import MTError
from transformer_mt.internals.reportlab_private import forget
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
           "fonts-noto-cjk) or set MT_PDF_FONT to a font file (.ttf, .otf) that has them")
# the regions Chinese, Japanese and Korean fonts are made for (Noto Sans CJK's and Source Han
# Sans's families end with one), by language tag
REGIONS = {"ja": "JP", "ko": "KR", "zh": "SC", "zh-hans": "SC", "zh-cn": "SC", "zh-sg": "SC",
           "zh-hant": "TC", "zh-tw": "TC", "zh-hk": "HK", "zh-mo": "HK"}


@dataclass(frozen=True)
class Face:
    """A look's font as ReportLab names it, and whether it is drawn thicker (bold from a
    family without one) or slanted (its italic)."""

    name: str
    thicker: bool = False
    slanted: bool = False


@contextmanager
def faces(name: str, text: str, target: str | None = None,
          ) -> Iterator[dict[tuple[bool, bool], Face]]:
    """Each look's face for a translation into ``target`` holding ``text`` (the module's
    docstring), registered with ReportLab while the document is drawn."""
    ordered = list(dict.fromkeys(c for c in text if not c.isspace()))  # (as they come)
    letters = set(ordered)
    if all(_standard_has(c) for c in ordered):
        yield _standard()
        return
    check(name, text)
    looks = _Looks(_family(name, letters, target), frozenset(text) | {" ", "-"})
    try:
        yield looks
    finally:
        _release(looks.cuts)


class _Looks(dict[tuple[bool, bool], Face]):
    """Each look's face in ``files`` (:func:`_family`), registered the first time the
    document draws in that look (a font of CFF outlines cut to ``drawn``: ~0.5 s for a page of
    Chinese, spent only on the looks the document has)."""

    def __init__(self, files: dict[tuple[bool, bool], Font], drawn: frozenset[str]) -> None:
        super().__init__()
        self.files, self.drawn, self.cuts = files, drawn, list[Cut]()

    def __missing__(self, look: tuple[bool, bool]) -> Face:
        bold, oblique = look
        have = [had for had in [look, (bold, False), (False, oblique), LOOKS[0]]
                if had in self.files]
        path, index, cff = self.files[have[0]]
        if cff:
            self.cuts.append((path, index, self.drawn))
        self[look] = face = Face(_cut(*self.cuts[-1]) if cff else _registered(path, index),
                                 thicker=bold and not have[0][0],
                                 slanted=oblique and not have[0][1])
        return face


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


Font = tuple[str, int, bool]  # a font's file, index in a collection, whether CFF outlines
Cut = tuple[str, int, frozenset[str]]  # a font's file, index in a collection, letters cut to
KEEP = 8  # fonts cut to a document's letters kept registered when no document draws with them
_CUTS: OrderedDict[Cut, str] = OrderedDict()  # each cut's name, the last used last
_USERS: Counter[Cut] = Counter()  # how many documents draw with each cut now
_CUTS_LOCK = threading.Lock()


def _family(name: str, letters: set[str], target: str | None) -> dict[tuple[bool, bool], Font]:
    """Each look's font an installed family has, of the first family (:func:`_preference`)
    whose fonts have every one of ``letters`` (or ``MT_PDF_FONT``'s file)."""
    chosen = os.environ.get("MT_PDF_FONT")
    if chosen:
        return {LOOKS[0]: _chosen(name, letters, chosen)}
    shown = "".join(sorted(c for c in letters if not _standard_has(c)))[:3]
    families: dict[str, dict[tuple[bool, bool], Font]] = {}
    for path, index, family, style, cff in sorted(_listed(letters)):
        if style.lower() in STYLES:
            families.setdefault(family, {}).setdefault(STYLES[style.lower()],
                                                       (path, index, cff))
    found = sorted((f for f in families if LOOKS[0] in families[f]),
                   key=lambda f: _preference(f, target, families[f][LOOKS[0]][2]))
    if not found:
        raise MTError(f"'{name}': no installed font has every letter of the translation "
                      f"({shown!r}... are outside PDF's standard fonts): {INSTALL}")
    return families[found[0]]


def _chosen(name: str, letters: set[str], chosen: str) -> Font:
    """``MT_PDF_FONT``'s file, where it has every one of ``letters``; else a one-line error."""
    if not os.path.isfile(chosen):
        raise MTError(f"MT_PDF_FONT: no such font file '{chosen}'")
    read = _read(chosen, 0)
    if read is None:
        raise MTError(f"MT_PDF_FONT: '{chosen}' is not a font file ReportLab can embed "
                      "(TrueType or OpenType)")
    lacking = sorted(c for c in letters if ord(c) not in read[1])
    if lacking:
        raise MTError(f"'{name}': the font MT_PDF_FONT names ('{chosen}') has no "
                      f"{lacking[0]!r}, which the translation holds")
    return chosen, 0, read[0][4]


def _listed(letters: set[str]) -> list[tuple[str, int, str, str, bool]]:
    """The installed fonts that have every one of ``letters``: (file, index in a
    collection, family, style, whether CFF outlines); fontconfig's, else those of the usual
    folders."""
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
    return [(r[0], int(r[1] or 0), r[2], r[3], r[4] == "CFF") for r in rows
            if len(r) == 5 and r[4] in ("TrueType", "CFF") and int(r[1] or 0) < 2**16]


def font_folders() -> list[Path]:
    """Where fonts are installed: Linux's, macOS's and Windows' folders."""
    home = Path.home()
    return [Path("/usr/share/fonts"), Path("/usr/local/share/fonts"), home / ".fonts",
            home / ".local/share/fonts", Path("/System/Library/Fonts"),
            Path("/Library/Fonts"), home / "Library/Fonts",
            Path(os.environ.get("WINDIR", "C:\\Windows")) / "Fonts"]


@cache
def _scanned() -> list[tuple[tuple[str, int, str, str, bool], frozenset[int]]]:
    """Each font of :func:`font_folders` (each of a collection's) that ReportLab can embed,
    as :func:`_listed` says it, and the letters it has (read once a process)."""
    out = []
    for folder in font_folders():
        paths = sorted(p for p in folder.rglob("*") if p.suffix.lower() in
                       (".ttf", ".ttc", ".otf")) if folder.is_dir() else []
        for path in paths:
            for index in range(32 if path.suffix.lower() == ".ttc" else 1):
                read = _read(str(path), index)
                if read is None:
                    break  # (not a font, or no more in the collection)
                out.append(read)
    return out


def _read(path: str, index: int) -> tuple[tuple[str, int, str, str, bool], frozenset[int]
                                          ] | None:
    """The font at ``path`` (``index`` in a collection) as :func:`_listed` says it and the
    letters it has; None where it is no font ReportLab can embed, as it is or made TrueType
    (a variable font's CFF2 outlines are not)."""
    from fontTools.ttLib import TTFont, TTLibError

    try:
        font = TTFont(path, fontNumber=index, lazy=True)
        if "glyf" not in font and "CFF " not in font:
            return None
        names, cmap = font["name"], font.getBestCmap() or {}
        return ((path, index, names.getDebugName(1) or "", names.getDebugName(2) or "",
                 "CFF " in font), frozenset(cmap))
    except (OSError, TTLibError, AssertionError, KeyError, ValueError, IndexError):
        return None


def _preference(family: str, target: str | None, cff: bool) -> tuple[int, bool, bool, bool,
                                                                      str]:
    """The order families are chosen in: :data:`PREFERRED`; one made for the region of
    ``target`` (:data:`REGIONS`); sans-serif ones; TrueType before CFF outlines."""
    rank = PREFERRED.index(family) if family in PREFERRED else len(PREFERRED)
    tag = (target or "").lower().replace("_", "-")
    region = REGIONS.get(tag) or REGIONS.get(tag.split("-")[0])
    return (rank, region not in family.split(), not ("Sans" in family and "Mono" not in family),
            cff, family)


@cache
def _registered(path: str, index: int) -> str:
    """The name ReportLab draws the TrueType font of ``path`` (``index`` in a collection) by."""
    font_name = f"MT-{os.path.basename(path)}-{index}-{_tag(path)}"
    _register(font_name, path, path, index)
    return font_name


def _cut(path: str, index: int, letters: frozenset[str]) -> str:
    """The name ReportLab draws the font of CFF outlines at ``path`` (``index`` in a
    collection) by, cut to ``letters`` and made TrueType (:func:`_truetype`), for one more
    document that draws with it (:func:`_release` when it is written)."""
    with _CUTS_LOCK:
        key = (path, index, letters)
        if key not in _CUTS:
            tag = _tag(path, letters)
            font_name = f"MT-{os.path.basename(path)}-{index}-{tag}"
            _register(font_name, path, _truetype(path, index, letters, tag), 0)
            _CUTS[key] = font_name
        _CUTS.move_to_end(key)
        _USERS[key] += 1
        return _CUTS[key]


def _release(cuts: list[Cut]) -> None:
    """One document fewer draws with each of ``cuts``; of the cuts no document draws with,
    all but the :data:`KEEP` last used are let go of (ReportLab would keep them all)."""
    with _CUTS_LOCK:
        _USERS.subtract(cuts)
        unused = [key for key in _CUTS if _USERS[key] <= 0]
        for key in unused[:max(0, len(unused) - KEEP)]:
            forget(_CUTS.pop(key))
            del _USERS[key]


def _tag(path: str, letters: frozenset[str] = frozenset()) -> str:
    """A font file's (cut to ``letters``) mark in the names ReportLab knows it by: two files
    of one name in two folders, or two cuts of one file, are two fonts."""
    return hashlib.sha1("\0".join([path, *sorted(letters)]).encode()).hexdigest()[:12]


def _register(font_name: str, path: str, source: str | io.BytesIO, index: int) -> None:
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.ttfonts import TTFError, TTFont

    try:
        pdfmetrics.registerFont(TTFont(font_name, source, subfontIndex=index))
    except (OSError, TTFError) as exc:
        raise MTError(f"the font '{path}' cannot be embedded in a PDF: {exc}") from None


def _truetype(path: str, index: int, letters: frozenset[str], tag: str) -> io.BytesIO:
    """The font of CFF outlines at ``path`` (``index`` in a collection) cut to ``letters``
    (fontTools' subsetter) with its cubic curves made TrueType's quadratic ones (fontTools'
    cu2qu, within a unit of its em), as fontTools' ``otf2ttf`` snippet does; its PostScript
    name ends in ``tag``: ReportLab takes a font of a PostScript name it knows for that font,
    and each cut has letters of its own."""
    from fontTools import subset
    from fontTools.pens.cu2quPen import Cu2QuPen
    from fontTools.pens.ttGlyphPen import TTGlyphPen
    from fontTools.ttLib import TTFont, TTLibError, newTable

    try:
        font = TTFont(path, fontNumber=index, lazy=True)
        options = subset.Options(name_IDs=["*"], name_languages=["*"], notdef_outline=True)
        options.drop_tables += ["VORG", "vhea", "vmtx"]
        cutter = subset.Subsetter(options)
        cutter.populate(unicodes=[ord(c) for c in letters])
        cutter.subset(font)
        order, drawn = font.getGlyphOrder(), font.getGlyphSet()
        glyphs = {}
        for glyph in order:
            pen = TTGlyphPen(drawn)
            drawn[glyph].draw(Cu2QuPen(pen, 1.0, reverse_direction=True))
            glyphs[glyph] = pen.glyph()
    except (OSError, TTLibError, AssertionError, KeyError, ValueError) as exc:
        raise MTError(f"the font '{path}' cannot be embedded in a PDF: {exc}") from None
    del font["CFF "]
    names = font["name"]
    named = next(filter(None, map(names.getDebugName, (6, 4, 1))), "Font").replace(" ", "-")
    names.removeNames(nameID=6)
    for platform in ((3, 1, 0x409), (1, 0, 0)):  # (the two ReportLab reads)
        names.setName(f"{named[:48]}-{tag}", 6, *platform)
    font["loca"], font["glyf"] = newTable("loca"), newTable("glyf")
    font["glyf"].glyphOrder, font["glyf"].glyphs = order, glyphs
    font["glyf"].compile(font)
    for glyph, outline in glyphs.items():  # (each glyph's left side bearing: its xMin)
        font["hmtx"][glyph] = (font["hmtx"][glyph][0], getattr(outline, "xMin", 0))
    font["maxp"] = maxp = newTable("maxp")
    maxp.tableVersion, maxp.maxZones = 0x00010000, 1
    for field in ("maxTwilightPoints", "maxStorage", "maxFunctionDefs", "maxInstructionDefs",
                  "maxStackElements", "maxSizeOfInstructions", "maxComponentElements"):
        setattr(maxp, field, 0)
    post = font["post"]
    post.formatType, post.extraNames, post.mapping, post.glyphOrder = 2.0, [], {}, order
    font.sfntVersion = "\0\1\0\0"
    out = io.BytesIO()
    font.save(out)
    out.seek(0)
    return out
