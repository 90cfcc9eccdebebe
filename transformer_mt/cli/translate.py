"""``mt translate``: sentences, a file or standard input translated with a checkpoint (or an
export), as text, n-best, alternatives, word alignments or attention maps, or at a prompt.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import gzip
import logging
import math
import sys
import zlib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from transformer_mt.cli.flags import add_decoding_flags, add_engine_flags, add_workers_flag
from transformer_mt.cli.parts import in_parts, translate_in_parts
from transformer_mt.config import per_call_settings
from transformer_mt.decode.align import pharaoh
from transformer_mt.errors import MTError
from transformer_mt.fileio import STD_STREAM, line_end, not_an_input, open_input, text_lines
from transformer_mt.logs import PROGRESS_FROM, bars_enabled

if TYPE_CHECKING:
    from transformer_mt.translate import Translation, Translator


def add(sub: Any, common: argparse.ArgumentParser) -> None:
    """``mt translate``."""
    p = sub.add_parser("translate", parents=[common], help="translate sentences, a file or stdin")
    p.add_argument("sentences", nargs="*", help="sentences to translate")
    p.add_argument("--checkpoint", required=True, action="append",
                   help="a .pt checkpoint (e.g. runs/X/best.pt); repeat it for an ensemble "
                   "that averages the models' probabilities")
    p.add_argument("--input", help="file with a sentence per line (a line of several is "
                   "translated sentence by sentence, and stays one line; '-' or a pipe such "
                   "as <(zcat de.gz) is read too; --whole: one text); a .html, .htm, .md, "
                   ".srt, .vtt, .ass, .ssa, .xlf, .po, .docx, .pptx, .xlsx, .odt, .odp, .ods, "
                   ".epub or .pdf file is translated whole, its format kept")
    p.add_argument("--whole", action="store_true",
                   help="read --input (a .txt, '-' or a pipe; else standard input) as one "
                   "text, not a sentence a line: a sentence across lines is read whole (a "
                   "paragraph wrapped at a width; a word a hyphen cuts at a line's end, as in "
                   "text copied from a PDF), every line break kept")
    p.add_argument("--split-sentences", action="store_true",  # what every line gets now
                   help=argparse.SUPPRESS)
    p.add_argument("--output", help="write translations here instead of stdout ('-'); of "
                   "many lines, a run stopped on the way goes on from where it stopped when "
                   "run again (OUTPUT.partial)")
    p.add_argument("--nbest", type=int, default=1, help="print the N best translations")
    add_decoding_flags(p)
    add_engine_flags(p)
    add_workers_flag(p)
    p.add_argument("--attention", metavar="PNG",
                   help="save a cross-attention heatmap of the (one) sentence here")
    p.add_argument("--prefix", metavar="TEXT",
                   help="each translation begins with TEXT; the model continues it (an "
                   "unfinished last word is finished: \"A ma\" may become \"A man\")")
    p.add_argument("--glossary", metavar="FILE",
                   help="terms each translation must hold: a file of 'source term<TAB>target "
                   "term' lines; where a source term is found (whole words, any case), its "
                   "target term is in the output, exactly (and none of the words in the "
                   "line's further fields: 'Hund<TAB>hound<TAB>dog'); or a termbase (.tbx: "
                   "each concept's preferred term, its deprecated ones avoided)")
    p.add_argument("--memory", metavar="FILE",
                   help="translations to use as they are: a sentence the memory holds (the "
                   "same text but for spacing) is translated as it says, not decoded; a "
                   "translation memory (.tmx, in the model's languages) or 'source<TAB>"
                   "translation' lines")
    p.add_argument("--alternatives", type=int, metavar="K",
                   help="print the K most probable tokens after --prefix (or at the start), "
                   "each with the translation completed from it: index, token, "
                   "log-probability, text")
    p.add_argument("--align", action="store_true",
                   help="print each translation's word alignment after \" ||| \" (source-output "
                   "word pairs from 0, e.g. 0-0 1-2), read off the cross-attention of --layer "
                   "and --head")
    p.add_argument("--layer", type=int, default=-1, help="decoder layer for --attention and "
                   "--align (default: the last)")
    p.add_argument("--head", type=int, help="head for --attention and --align (default: mean "
                   "over heads)")
    p.set_defaults(func=cmd_translate)

log = logging.getLogger("transformer_mt.cli")

STDIN_CHUNK = 256  # lines of piped standard input translated together


def cmd_translate(args: argparse.Namespace) -> int:
    from transformer_mt.translate.files import is_document

    if args.output == STD_STREAM:
        args.output = None  # standard output, as without --output
    translator = _translator_for(args)
    if args.whole or (args.input and is_document(args.input)):  # HTML, subtitles: their
        return _translate_document(translator, args)  # format kept
    ends: Counter[str] = Counter()  # the input's line ends: its translation's are the same
    lines = _given_lines(args, ends)
    if args.attention:
        return _attention_map(translator, lines, args)
    if args.alternatives:
        return _emit(args, _alternatives(translator, lines, args))
    if lines is None:  # standard input
        if sys.stdin.isatty():
            return _interactive(translator, args)
        stream = text_lines(sys.stdin.buffer, "standard input", ends)
        if not args.output:  # a pipe: translated a chunk of lines at a time, as they come
            return _translate_stream(translator, args, stream, ends)
        lines = list(stream)
    if not any(line.strip() for line in lines):
        raise MTError("the input is empty; give a sentence, --input FILE or lines on stdin")
    translated = functools.partial(_translated, translator, args)
    if in_parts(args, lines):  # many lines: a stopped run goes on where it stopped
        return translate_in_parts(args, lines, translated, line_end(ends))
    return _emit(args, translated(lines, 0), line_end(ends))


def _translated(translator: Translator, args: argparse.Namespace, lines: list[str],
                start: int) -> list[str]:
    """The output lines of ``lines``, the first of which is the input's line ``start``."""
    results = _translations(translator, args, lines,
                            bars_enabled() and len(lines) > PROGRESS_FROM)
    return [line for i, hyps in enumerate(results, start) for line in _rendered(args, i, hyps)]


def _translate_document(translator: Translator, args: argparse.Namespace) -> int:
    """``--input`` an HTML or subtitle file, or (``--whole``) text: translated whole
    (``translate/files.py``), to ``--output`` (written whole, or not at all) or stdout."""
    from transformer_mt.fileio import atomic_write_bytes, atomic_write_text
    from transformer_mt.translate.files import is_document, translate_file

    path = Path(args.input or STD_STREAM)
    name = "standard input" if str(path) == STD_STREAM else str(path)
    if args.whole and args.sentences:
        raise MTError("--whole reads --input or standard input; the sentences given are "
                      "each read whole already")
    if args.nbest > 1 or args.attention or args.align or args.prefix or args.alternatives:
        raise MTError(f"'{name}' is translated whole, its format kept; drop --nbest, "
                      "--attention, --align, --prefix and --alternatives")
    why = not_an_input(path)
    if why:
        raise MTError(f"input file '{path}' {why}")
    if name == "standard input" and sys.stdin.isatty():
        raise MTError("--whole reads standard input to its end: pipe the text in, or give "
                      "--input FILE")
    whole_text = not is_document(path)
    data = _text_read_whole(path, name) if whole_text else path.read_bytes()
    out = translate_file(translator, name, data, kind="text" if whole_text else None,
                         progress=bars_enabled())
    if args.output:
        if whole_text:  # (gzipped where the name ends in .gz, as the lines are written)
            atomic_write_text(args.output, out.decode("utf-8"))
        else:
            atomic_write_bytes(args.output, out)
        log.info("wrote %s", args.output)
    elif hasattr(sys.stdout, "buffer"):  # the bytes as they are: a .docx piped is a .docx
        sys.stdout.flush()
        sys.stdout.buffer.write(out)
        sys.stdout.buffer.flush()
    else:  # a text stream only (Python's, redirected)
        sys.stdout.write(out.decode("utf-8", "replace"))
    return 0


def _text_read_whole(path: Path, name: str) -> bytes:
    """The bytes of the text in ``path`` (a file, ``-`` or a pipe; gzipped or not) for
    ``--whole``; a one-line error where there is no text."""
    with open_input(path) as f:
        data = f.read()
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise MTError(f"cannot read {name}: {exc}") from None
    if not data.strip():
        raise MTError(f"the input ({name}) is empty; nothing to translate")
    return data


def _emit(args: argparse.Namespace, out: list[str], end: str = "\n") -> int:
    """The lines, each ending in ``end``, to ``--output`` (written whole, or not at all), else
    to stdout."""
    from transformer_mt.fileio import atomic_write_text

    if args.output:
        atomic_write_text(args.output, "".join(line + end for line in out))
        log.info("wrote %d lines to %s", len(out), args.output)
    else:
        for line in out:
            print(line, end=end)
    return 0


def _translator_for(args: argparse.Namespace) -> Translator:
    """The checked arguments' translator, decoding with this command's settings (the flags
    named as in DecodeConfig) every way it does: lines, the interactive prompt, the
    attention map."""
    from transformer_mt.fileio import refuse_same_file
    from transformer_mt.translate import Translator
    from transformer_mt.translate.memory import Memory
    from transformer_mt.translate.user_files import file_languages

    if args.sentences and args.input:
        raise MTError("give sentences or --input FILE, not both")
    if args.split_sentences and (args.nbest > 1 or args.attention or args.align or args.prefix
                                 or args.alternatives):
        raise MTError("--split-sentences gives one translation per line; drop --nbest, "
                      "--attention, --align, --prefix and --alternatives, or give one sentence "
                      "per line (without them a line's sentences are split anyway)")
    if args.attention and (args.prefix or args.alternatives):
        raise MTError("--attention draws the model's own translation; drop --prefix and "
                      "--alternatives")
    if args.memory and (args.nbest > 1 or args.attention or args.align or args.prefix
                        or args.alternatives):
        raise MTError("--memory gives a sentence its one translation; --nbest, --attention, "
                      "--align, --prefix and --alternatives show the model's own: drop one")
    refuse_same_file(args.output, [args.input, args.glossary, args.memory, *args.checkpoint])
    glossary = None
    if args.glossary or args.keep_spans:  # asked for: held to (an error where it cannot be);
        from transformer_mt.translate.glossary import KEEP, Glossary  # by default (the

        glossary = Glossary.read(args.glossary, bool(args.keep_spans), file_languages(
            args.glossary, args.checkpoint[0])) if args.glossary \
            else KEEP  # checkpoint's decode.keep_spans) kept where the search can
    memory = Memory.read(args.memory, file_languages(args.memory, args.checkpoint[0])) \
        if args.memory else None  # (before the model loads, as the glossary)
    translator = Translator.load(args.checkpoint, args.device, args.engine, args.compile,
                                 args.workers)
    decode = translator.settings(**{f.name: getattr(args, f.name) for f in per_call_settings()})
    if args.nbest > decode.beam_size and not decode.samples:  # n best: a beam n wide
        decode = dataclasses.replace(decode, beam_size=args.nbest)
    return translator.with_settings(decode, glossary, memory)


def _given_lines(args: argparse.Namespace, ends: Counter[str]) -> list[str] | None:
    """The sentences given as arguments or in ``--input`` (its line ends counted in
    ``ends``); None: standard input."""
    if args.sentences:
        return list(args.sentences)
    if not args.input or (args.input == STD_STREAM and not (args.attention or args.alternatives)):
        return None  # read as it comes (a terminal's or a pipe's lines)
    path = Path(args.input)
    why = not_an_input(path)
    if why:
        raise MTError(f"input file '{path}' {why}")
    from transformer_mt.data.corpus import read_lines

    lines = list(read_lines(path, ends))
    if not lines:
        raise MTError(f"input file '{path}' is empty; nothing to translate")
    return lines


def _translations(translator: Translator, args: argparse.Namespace, chunk: list[str],
                  progress: bool = False) -> list[list[Translation]]:
    """The ``--nbest`` translations of each line; where one is asked for without ``--align``
    or ``--prefix``, a line's sentences (and the parts of one longer than the model takes)
    each translated, the line put back together."""
    from transformer_mt.translate import Translation
    from transformer_mt.translate.sentences import sentence_spans

    if args.nbest > 1 or args.align or args.prefix:
        several = sum(len(sentence_spans(line, translator.config.data.src_lang)) > 1
                      for line in chunk)
        if several:
            log.warning("%d line(s) hold several sentences: --nbest, --align and --prefix read "
                        "a line as one, and the model may leave the later ones out; give one "
                        "sentence a line", several)
        prefix = [args.prefix] * len(chunk) if args.prefix else None
        results = translator.translate(chunk, nbest=args.nbest, scores=args.nbest > 1,
                                       progress=progress, prefix=prefix)
        if args.align:
            for line, hyps in zip(chunk, results, strict=True):
                for h in hyps:
                    h.alignment = translator.align(line, h, args.layer, args.head) \
                        if line.strip() else []
        return results
    return [[Translation(text, [], math.nan)]
            for text in translator.translate(chunk, progress=progress)]


def _rendered(args: argparse.Namespace, index: int, hyps: list[Translation]) -> list[str]:
    """A line's output: its translation, or with ``--nbest`` one "index, score, text" each;
    with ``--align``, the text is followed by ``" ||| "`` and its alignment (``0-0 1-2``)."""
    texts = [h.text if h.alignment is None else f"{h.text} ||| {pharaoh(h.alignment)}"
             for h in hyps]
    if args.nbest == 1:
        return texts[:1]
    return [f"{index}\t{h.score:.4f}\t{text}" for h, text in zip(hyps, texts, strict=True)]


def _alternatives(translator: Translator, lines: list[str] | None,
                  args: argparse.Namespace) -> list[str]:
    """``--alternatives K``: for each sentence, the K best tokens after ``--prefix``, each
    with the translation completed from it: "index, token, log-probability, text"."""
    if not lines:
        raise MTError("--alternatives takes sentences or --input FILE, e.g. mt translate "
                      "--checkpoint CKPT --prefix \"A man\" --alternatives 5 \"Ein Mann.\"")
    out = []
    for index, line in enumerate(lines):
        if not line.strip():
            raise MTError(f"line {index + 1} is blank: --alternatives needs a sentence on "
                          "every line")
        out += [f"{index}\t{c.token}\t{c.log_prob:.4f}\t{c.translation.text}"
                for c in translator.alternatives(line, args.prefix or "", args.alternatives)]
    return out


def _translate_stream(translator: Translator, args: argparse.Namespace,
                      stream: Iterator[str], ends: Counter[str]) -> int:
    """Piped standard input, translated and printed a chunk of lines at a time, in order, each
    ending as the first chunk's lines did (``ends``)."""
    done, end = 0, ""
    for chunk in _chunks(stream, STDIN_CHUNK):
        end = end or line_end(ends)
        for i, hyps in enumerate(_translations(translator, args, chunk), start=done):
            for out_line in _rendered(args, i, hyps):
                print(out_line, end=end)
        sys.stdout.flush()
        done += len(chunk)
    return 0


def _chunks(lines: Iterator[str], size: int) -> Iterator[list[str]]:
    chunk: list[str] = []
    for line in lines:
        chunk.append(line)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _attention_map(translator, lines: list[str] | None, args: argparse.Namespace) -> int:
    from transformer_mt.fileio import refuse_same_file
    from transformer_mt.inside.plots import check_image_path, plot_attention, pyplot
    from transformer_mt.inside.trace import cross_attention

    pyplot()  # matplotlib is there, before any translation

    if not lines or len(lines) != 1 or not lines[0].strip():
        raise MTError("--attention takes exactly one sentence, e.g. "
                      "mt translate --checkpoint CKPT --attention att.png \"A sentence.\"")
    check_image_path(args.attention)
    refuse_same_file(args.attention, [args.input, *args.checkpoint], "--attention")
    src, out, weights, text = cross_attention(translator, lines[0], args.layer, args.head)
    heads = "mean over heads" if args.head is None else f"head {args.head}"
    plot_attention(weights, out, src, Path(args.attention),
                   f"cross-attention, decoder layer "
                   f"{'last' if args.layer == -1 else args.layer}, {heads}")
    print(text)
    log.info("attention map written to %s", args.attention)
    return 0


def _interactive(translator, args: argparse.Namespace) -> int:
    src, tgt = translator.config.data.src_lang, translator.config.data.tgt_lang
    print(f"Type a sentence ({src}) and press Enter; Ctrl-D quits.", file=sys.stderr)
    while True:
        try:
            line = input(f"{src}> ")
        except EOFError:
            print(file=sys.stderr)
            return 0
        if line.strip():
            print(f"{tgt}> " + translator.translate([line])[0])
