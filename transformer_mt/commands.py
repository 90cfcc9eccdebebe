"""What each ``mt`` command does, once ``cli.py`` has parsed its arguments: load what it
needs, call one function of the package, print or write the result. Errors the user can fix
are raised as :class:`MTError` (``cli.main`` prints them as one line)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import math
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from transformer_mt.config import per_call_settings
from transformer_mt.decode.align import pharaoh
from transformer_mt.errors import MTError
from transformer_mt.fileio import not_a_file, text_lines
from transformer_mt.logs import bars_enabled

if TYPE_CHECKING:
    from transformer_mt.config import Config
    from transformer_mt.translate import Translation, Translator

log = logging.getLogger("transformer_mt.cli")


# --------------------------------------------------------------------------------------- train

def _config(args: argparse.Namespace) -> Config:
    """The config of ``--config``, ``--set`` and ``--data-dir``."""
    from transformer_mt.config_file import load_config

    overrides = list(args.set or [])
    if args.data_dir:
        overrides.append(f"data.data_dir={args.data_dir}")
    return load_config(args.config, overrides)


def cmd_train(args: argparse.Namespace) -> int:
    from transformer_mt.training.trainer import train

    config = _config(args)
    run_dir = Path(args.run_dir) if args.run_dir else Path("runs") / config.name
    progress = train(config, run_dir, args.start, progress=None if not args.quiet else False)
    if os.environ.get("RANK", "0") != "0":  # under torchrun, rank 0 speaks for all
        return 0
    best = run_dir / "best.pt"
    print(f"trained to step {progress.step}; best val BLEU {progress.best_bleu:.2f} "
          f"(step {progress.best_step}); best checkpoint: {best}")
    return 0


# ----------------------------------------------------------------------------------- translate

STDIN_CHUNK = 256  # lines of piped standard input translated together


def cmd_translate(args: argparse.Namespace) -> int:
    translator = _translator_for(args)
    lines = _given_lines(args)
    if args.attention:
        return _attention_map(translator, lines, args)
    if args.alternatives:
        return _emit(args, _alternatives(translator, lines, args))
    if lines is None:  # standard input
        if sys.stdin.isatty():
            return _interactive(translator, args)
        stream = text_lines(sys.stdin.buffer, "standard input")
        if not args.output:  # a pipe: translated a chunk of lines at a time, as they come
            return _translate_stream(translator, args, stream)
        lines = list(stream)
    if not any(line.strip() for line in lines):
        raise MTError("the input is empty; give a sentence, --input FILE or lines on stdin")
    results = _translations(translator, args, lines, bars_enabled() and len(lines) > 50)
    return _emit(args, [line for i, hyps in enumerate(results)
                        for line in _rendered(args, i, hyps)])


def _emit(args: argparse.Namespace, out: list[str]) -> int:
    """The lines to ``--output`` (written whole, or not at all), else to stdout."""
    from transformer_mt.fileio import atomic_write_text

    if args.output:
        atomic_write_text(args.output, "".join(line + "\n" for line in out))
        log.info("wrote %d lines to %s", len(out), args.output)
    else:
        for line in out:
            print(line)
    return 0


def _translator_for(args: argparse.Namespace) -> Translator:
    """The checked arguments' translator, decoding with this command's settings (the flags
    named as in DecodeConfig) every way it does: lines, split sentences, the interactive
    prompt, the attention map."""
    from transformer_mt.fileio import refuse_same_file
    from transformer_mt.translate import Translator

    if args.sentences and args.input:
        raise MTError("give sentences or --input FILE, not both")
    if args.split_sentences and (args.nbest > 1 or args.attention or args.align or args.prefix
                                 or args.alternatives):
        raise MTError("--split-sentences gives one translation per line; drop --nbest, "
                      "--attention, --align, --prefix and --alternatives, or give one sentence "
                      "per line")
    if args.attention and (args.prefix or args.alternatives):
        raise MTError("--attention draws the model's own translation; drop --prefix and "
                      "--alternatives")
    refuse_same_file(args.output, [args.input, *args.checkpoint])
    translator = Translator.load(args.checkpoint, args.device, args.engine, args.compile)
    decode = translator.settings(**{f.name: getattr(args, f.name) for f in per_call_settings()})
    if args.nbest > decode.beam_size:  # n best need a beam at least n wide
        decode = dataclasses.replace(decode, beam_size=args.nbest)
    translator.config.decode = decode
    return translator


def _given_lines(args: argparse.Namespace) -> list[str] | None:
    """The sentences given as arguments or in ``--input``; None: standard input."""
    if args.sentences:
        return list(args.sentences)
    if not args.input:
        return None
    path = Path(args.input)
    why = not_a_file(path)
    if why:
        raise MTError(f"input file '{path}' {why}")
    from transformer_mt.data.corpus import read_lines

    lines = list(read_lines(path))
    if not lines:
        raise MTError(f"input file '{path}' is empty; nothing to translate")
    return lines


def _translations(translator: Translator, args: argparse.Namespace, chunk: list[str],
                  progress: bool = False) -> list[list[Translation]]:
    """The ``--nbest`` translations of each line (one, put back together, with
    ``--split-sentences``)."""
    from transformer_mt.translate import Translation

    if not args.split_sentences:
        prefix = [args.prefix] * len(chunk) if args.prefix else None
        results = translator.translate_nbest(chunk, args.nbest, scores=args.nbest > 1,
                                             progress=progress, prefix=prefix)
        if args.align:
            for line, hyps in zip(chunk, results, strict=True):
                for h in hyps:
                    h.alignment = translator.align(line, h, args.layer, args.head) \
                        if line.strip() else []
        return results
    return [[Translation(text, [], math.nan)] for text in translator.translate_text(chunk)]


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
                      stream: Iterator[str]) -> int:
    """Piped standard input, translated and printed a chunk of lines at a time, in order."""
    done = 0
    for chunk in _chunks(stream, STDIN_CHUNK):
        for i, hyps in enumerate(_translations(translator, args, chunk), start=done):
            for out_line in _rendered(args, i, hyps):
                print(out_line)
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
    from transformer_mt.plots import check_image_path, plot_attention, pyplot
    from transformer_mt.trace import cross_attention

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


# ---------------------------------------------------------------------------- average

def cmd_average(args: argparse.Namespace) -> int:
    from transformer_mt.average import average_checkpoints
    from transformer_mt.checkpoint import save_checkpoint
    from transformer_mt.fileio import refuse_same_file

    if len(args.checkpoints) < 2:
        raise MTError("mt average needs two or more checkpoints")
    refuse_same_file(args.output, args.checkpoints)
    save_checkpoint(average_checkpoints(args.checkpoints), args.output)
    print(f"averaged {len(args.checkpoints)} checkpoints into {args.output}")
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    from transformer_mt.plots import plot_run

    for path in plot_run(Path(args.run_dir), Path(args.output) if args.output else None):
        print(path)
    return 0


def cmd_trace(args: argparse.Namespace) -> int:
    from transformer_mt.lens import Switch, trace_compare, trace_lens, trace_run, trace_switches
    from transformer_mt.trace import trace
    from transformer_mt.translate import Translator

    if not args.sentence.strip():
        raise MTError("give a sentence to trace, e.g. mt trace \"A sentence.\" (in the "
                      "model's source language)")
    if args.run_dir:
        trace_run(args.run_dir, args.sentence, print, args.device)
        return 0
    if len(args.checkpoint) > 1:
        trace_compare([Translator.load(c, args.device) for c in args.checkpoint],
                      args.checkpoint, args.sentence, print)
        return 0
    if args.figures:
        from transformer_mt.plots import pyplot

        pyplot()  # matplotlib is there, before any work
    if args.checkpoint:
        translator = Translator.load(args.checkpoint[0], args.device)
        print(f"model: {args.checkpoint[0]}")
    else:
        translator = Translator.untrained(data_dir=args.data_dir)
        print("model: seeded UNTRAINED model (default config): the stages are real, the "
              "translation is noise; pass --checkpoint for a trained one")
    switches = [Switch.parse(spec) for spec in args.switch]  # bad ones refused first
    trace(translator, args.sentence, print, Path(args.figures) if args.figures else None,
          prefix=args.prefix or "", alternatives=args.alternatives or 0)
    if args.lens:
        trace_lens(translator, args.sentence, print)
    if switches:
        trace_switches(translator, args.sentence, switches, print)
    return 0


def cmd_data(args: argparse.Namespace) -> int:
    from transformer_mt.data.summary import format_summary, summarize

    summary = summarize(_config(args), progress=bars_enabled())
    print(json.dumps(summary, indent=2) if args.json else format_summary(summary))
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    from transformer_mt.build import model_from_checkpoint
    from transformer_mt.checkpoint import load_checkpoint

    ckpt = load_checkpoint(args.checkpoint)
    model, config, src_vocab, tgt_vocab = model_from_checkpoint(ckpt, args.checkpoint)
    p = ckpt["progress"]
    info = {"checkpoint": str(args.checkpoint), "format_version": ckpt["format_version"],
            "torch_version": ckpt.get("torch_version"), "step": p.get("step"),
            "epoch": p.get("epoch"), "best_val_bleu": p.get("best_bleu"),
            "best_step": p.get("best_step"), "parameters": model.num_parameters(),
            "src_vocab": len(src_vocab), "tgt_vocab": len(tgt_vocab),
            "resumable": "training_state" in ckpt, "config": config.to_dict()}
    if "averaged_from" in p:
        info["averaged_from"] = p["averaged_from"]
    if "data" in ckpt:  # pairs trained on, and what each filter removed
        info["training_pairs"] = ckpt["data"].get("pairs")
        info["removed_pairs"] = ckpt["data"].get("removed")
        corpora = ckpt["data"].get("corpora") or []
        if len(corpora) > 1:  # each corpus: its pairs, weight, tag and what was removed
            info["training_corpora"] = corpora
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    for key, value in info.items():
        if key != "config":
            print(f"{key:>16}: {value}")
    print("          config:")
    for section, values in info["config"].items():
        if isinstance(values, dict):
            print(f"    {section}: " + ", ".join(f"{k}={v}" for k, v in values.items()))
    return 0
