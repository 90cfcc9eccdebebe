"""The command line: ``mt COMMAND``, one entry point.

    mt train       train (or resume) a model from a YAML config
    mt translate   translate sentences, a file or standard input with a checkpoint
    mt evaluate    translate a test set (or --src/--ref files) and score it with sacreBLEU
    mt export      convert a checkpoint for CTranslate2 (an inference engine)
    mt average     average the weights of several checkpoints into one
    mt plot        plot loss, BLEU and learning rate of a run directory
    mt trace       walk one sentence through every stage of the model, with shapes
    mt info        describe a checkpoint (config, sizes, step, best BLEU)

Each command parses its arguments, loads what it needs and calls one function. Errors the user can
fix are printed as one line on stderr with a non-zero exit code; ``--debug`` shows the traceback.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from transformer_mt.errors import MTError
from transformer_mt.fileio import text_lines
from transformer_mt.logs import bars_enabled

log = logging.getLogger("transformer_mt.cli")

EXIT_ERROR = 2


# --------------------------------------------------------------------------------------- train

def cmd_train(args: argparse.Namespace) -> int:
    from transformer_mt.config import load_config
    from transformer_mt.training.trainer import train

    overrides = list(args.set or [])
    if args.data_dir:
        overrides.append(f"data.data_dir={args.data_dir}")
    config = load_config(args.config, overrides)
    run_dir = Path(args.run_dir) if args.run_dir else Path("runs") / config.name
    if args.overwrite and args.resume:
        raise MTError("--overwrite starts afresh and --resume continues: pass one of them")
    if args.resume and not (run_dir / "last.pt").exists():
        raise MTError(f"--resume: no checkpoint '{run_dir / 'last.pt'}' to resume from; "
                      "check --run-dir, or drop --resume to start a new run")
    if (run_dir / "last.pt").exists() and not (args.no_resume or args.overwrite):
        log.info("%s has a checkpoint: resuming that run (use a new --run-dir to start over)",
                 run_dir)
    progress = train(config, run_dir, resume=not args.no_resume,
                     progress=None if not args.quiet else False, overwrite=args.overwrite)
    if os.environ.get("RANK", "0") != "0":  # under torchrun, rank 0 speaks for all
        return 0
    best = run_dir / "best.pt"
    print(f"trained to step {progress.step}; best val BLEU {progress.best_bleu:.2f} "
          f"(step {progress.best_step}); best checkpoint: {best}")
    return 0


# ----------------------------------------------------------------------------------- translate

STDIN_CHUNK = 256  # lines of piped standard input translated together


def cmd_translate(args: argparse.Namespace) -> int:
    from transformer_mt.fileio import atomic_write_text, refuse_same_file
    from transformer_mt.translate import Translator

    if args.sentences and args.input:
        raise MTError("give sentences or --input FILE, not both")
    refuse_same_file(args.output, [args.input, *args.checkpoint])
    if args.engine == "ctranslate2":
        if len(args.checkpoint) > 1:
            raise MTError("--engine ctranslate2 translates with one exported model")
        translator = Translator.load_engine(args.checkpoint[0], args.device)
    else:
        translator = Translator.load(args.checkpoint, args.device)
    settings = dict(alpha=args.alpha, max_len_a=args.max_len_a, max_len_b=args.max_len_b,
                    sample_topk=args.sample_topk, temperature=args.temperature,
                    sample_seed=args.seed)
    translator.config.decode = translator.settings(**settings)
    if args.nbest > max(args.beam or translator.config.decode.beam_size, 1):
        args.beam = args.nbest
    if args.sentences:
        lines: list[str] | None = list(args.sentences)
    elif args.input:
        path = Path(args.input)
        if not path.is_file():
            raise MTError(f"input file '{path}' not found")
        from transformer_mt.data.corpus import read_lines

        lines = list(read_lines(path))
        if not lines:
            raise MTError(f"input file '{path}' is empty; nothing to translate")
    else:
        lines = None  # standard input

    def render(index: int, hyps: list) -> list[str]:
        if args.nbest == 1:
            return [hyps[0].text]
        return [f"{index}\t{h.score:.4f}\t{h.text}" for h in hyps]

    if args.attention:
        return _attention_map(translator, lines, args)
    if lines is None:
        if sys.stdin.isatty():
            return _interactive(translator, args)
        stream = text_lines(sys.stdin.buffer, "standard input")
        if args.output:
            lines = list(stream)
        else:  # a pipe: translate it a chunk of lines at a time, in order, as they come
            done = 0
            for chunk in _chunks(stream, STDIN_CHUNK):
                results = translator.translate_nbest(chunk, args.nbest, args.beam,
                                                      scores=args.nbest > 1)
                for i, hyps in enumerate(results, start=done):
                    for out_line in render(i, hyps):
                        print(out_line)
                sys.stdout.flush()
                done += len(chunk)
            return 0
    if not any(line.strip() for line in lines):
        raise MTError("the input is empty; give a sentence, --input FILE or lines on stdin")
    results = translator.translate_nbest(lines, args.nbest, args.beam, scores=args.nbest > 1,
                                         progress=bars_enabled() and len(lines) > 50)
    out = [line for i, hyps in enumerate(results) for line in render(i, hyps)]
    if args.output:
        atomic_write_text(args.output, "".join(line + "\n" for line in out))
        log.info("wrote %d translations to %s", len(results), args.output)
    else:
        for line in out:
            print(line)
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
    from transformer_mt.inspection import cross_attention, plot_attention

    if not lines or len(lines) != 1 or not lines[0].strip():
        raise MTError("--attention takes exactly one sentence, e.g. "
                      "mt translate --checkpoint CKPT --attention att.png \"A sentence.\"")
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
            print(f"{tgt}> " + translator.translate([line], args.beam)[0])


# ------------------------------------------------------------------------------------ evaluate

def cmd_evaluate(args: argparse.Namespace) -> int:
    from transformer_mt.data.corpus import read_lines
    from transformer_mt.evaluate import evaluate, read_test_set
    from transformer_mt.fileio import atomic_write_text, refuse_same_file
    from transformer_mt.translate import Translator

    if (args.src is None) != (args.ref is None):
        raise MTError("pass --src and --ref together (the source file and its references)")
    if args.src is not None and args.split is not None:
        raise MTError("pass either --split NAME or --src/--ref files, not both")
    refuse_same_file(args.output, [args.checkpoint, args.src, args.ref])
    translator = Translator.load(args.checkpoint, args.device)
    if args.data_dir:
        translator.config.data.data_dir = args.data_dir
    if args.src is not None:
        name = args.src
        sides = []
        for flag, path in (("--src", args.src), ("--ref", args.ref)):
            if not Path(path).is_file():
                raise MTError(f"{flag} file '{path}' not found")
            lines = list(read_lines(Path(path)))
            sides.append(lines[:args.max_sentences] if args.max_sentences else lines)
        sources, refs = sides
    else:
        tests = translator.config.data.test_sets()
        name = args.split or next(iter(tests), None)
        if name is None:
            raise MTError("the checkpoint's config names no test sets (data.test); pass --src "
                          "and --ref files, or --split valid")
        if name == "val" and "val" not in tests:
            name = "valid"
        sources, refs = read_test_set(translator, name, args.max_sentences)
    result = evaluate(translator, sources, refs, args.beam, progress=bars_enabled())
    hyps, s, beam = result.hypotheses, result.scores, result.beam_size
    if args.output:
        atomic_write_text(args.output, "".join(h + "\n" for h in hyps))
        log.info("wrote %d translations to %s", len(hyps), args.output)
    summary = {"checkpoint": str(args.checkpoint), "split": name, "sentences": len(hyps),
               "beam_size": beam, **s.as_dict()}
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"{name} ({len(hyps)} sentences, beam {beam}):")
        print(f"  {s.bleu_text}")
        print(f"  chrF2 = {s.chrf:.2f}")
        print(f"  signatures: {s.bleu_signature} | {s.chrf_signature}")
    return 0


# ---------------------------------------------------------------------------- export, average

def cmd_export(args: argparse.Namespace) -> int:
    from transformer_mt.export import export_ctranslate2

    out = export_ctranslate2(args.checkpoint, args.output_dir, args.quantization)
    print(f"exported {args.checkpoint} to {out}; translate with: mt translate --engine "
          f"ctranslate2 --checkpoint {out} ...")
    return 0


def cmd_average(args: argparse.Namespace) -> int:
    from transformer_mt.checkpoint import average_checkpoints, save_checkpoint
    from transformer_mt.fileio import refuse_same_file

    if len(args.checkpoints) < 2:
        raise MTError("mt average needs two or more checkpoints")
    refuse_same_file(args.output, args.checkpoints)
    save_checkpoint(average_checkpoints(args.checkpoints), args.output)
    print(f"averaged {len(args.checkpoints)} checkpoints into {args.output}")
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    from transformer_mt.inspection import plot_run

    for path in plot_run(Path(args.run_dir), Path(args.output) if args.output else None):
        print(path)
    return 0


def cmd_trace(args: argparse.Namespace) -> int:
    from transformer_mt.inspection import trace
    from transformer_mt.translate import Translator

    if not args.sentence.strip():
        raise MTError("give a sentence to trace, e.g. mt trace \"A sentence.\" (in the "
                      "model's source language)")
    if args.checkpoint:
        translator = Translator.load(args.checkpoint, args.device)
        print(f"model: {args.checkpoint}")
    else:
        translator = Translator.untrained(data_dir=args.data_dir)
        print("model: seeded UNTRAINED model (default config): the stages are real, the "
              "translation is noise; pass --checkpoint for a trained one")
    trace(translator, args.sentence, print, Path(args.figures) if args.figures else None)
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    from transformer_mt.checkpoint import load_checkpoint, model_from_checkpoint

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


# ---------------------------------------------------------------------------------------- main

def build_parser() -> argparse.ArgumentParser:
    from importlib.metadata import PackageNotFoundError, version

    from transformer_mt import __version__

    # --quiet and --debug work before the command and after it (SUPPRESS: a command's parser
    # leaves what the top level set alone)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--quiet", action="store_true", default=argparse.SUPPRESS,
                        help="only warnings and errors")
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="debug logs; tracebacks on errors")

    try:
        torch_version = version("torch")
    except PackageNotFoundError:
        torch_version = "not installed"
    parser = argparse.ArgumentParser(
        prog="mt", description="Train a Transformer to translate, translate with it and score "
        "it.")
    parser.add_argument("--quiet", action="store_true", help="only warnings and errors")
    parser.add_argument("--debug", action="store_true", help="debug logs; tracebacks on errors")
    parser.add_argument("--version", action="version",
                        version=f"mt (transformer_mt) {__version__}, torch {torch_version}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                parser_class=_CommandParser)

    p = sub.add_parser("train", parents=[common], help="train a model from a YAML config")
    p.add_argument("--config", required=True, help="YAML config, e.g. config/quickstart.yaml")
    p.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="override a config key, e.g. --set model.d_model=256 (repeatable)")
    p.add_argument("--run-dir", help="where checkpoints and logs go (default: runs/<name>)")
    p.add_argument("--data-dir", help="local directory with the Multi30k .gz files")
    p.add_argument("--resume", action="store_true",
                   help="resume the run in --run-dir (also happens when last.pt exists)")
    p.add_argument("--no-resume", action="store_true",
                   help="refuse to continue an existing run instead of resuming it")
    p.add_argument("--overwrite", action="store_true",
                   help="start afresh, deleting an earlier run's files in --run-dir "
                   "(checkpoints, metrics, logs)")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("translate", parents=[common], help="translate sentences, a file or stdin")
    p.add_argument("sentences", nargs="*", help="sentences to translate")
    p.add_argument("--checkpoint", required=True, action="append",
                   help="a .pt checkpoint (e.g. runs/X/best.pt); repeat it for an ensemble "
                   "that averages the models' probabilities")
    p.add_argument("--input", help="file with one sentence per line")
    p.add_argument("--output", help="write translations here instead of stdout")
    p.add_argument("--beam", type=int, help="beam size (1 = greedy; default: decode.beam_size)")
    p.add_argument("--nbest", type=int, default=1, help="print the N best translations")
    p.add_argument("--alpha", type=float, help="length penalty ((5 + len) / 6) ** alpha "
                   "(default: the checkpoint's decode.alpha)")
    p.add_argument("--max-len-a", type=float, help="output at most a * source length + b "
                   "tokens (default: decode.max_len_a)")
    p.add_argument("--max-len-b", type=int, help="see --max-len-a (default: decode.max_len_b)")
    p.add_argument("--sample-topk", type=int, help="sample each token from the K most probable "
                   "instead of searching (e.g. for back-translation)")
    p.add_argument("--temperature", type=float, help="sampling temperature (default: 1.0)")
    p.add_argument("--seed", type=int, help="seed of the sampling (default: 0)")
    p.add_argument("--engine", choices=["torch", "ctranslate2"], default="torch",
                   help="decode with our PyTorch model, or with a model exported by mt export "
                   "(--checkpoint is then its directory)")
    p.add_argument("--device", default="auto", help="auto, cpu or cuda")
    p.add_argument("--attention", metavar="PNG",
                   help="save a cross-attention heatmap of the (one) sentence here")
    p.add_argument("--layer", type=int, default=-1, help="decoder layer for --attention "
                   "(default: the last)")
    p.add_argument("--head", type=int, help="head for --attention (default: mean over heads)")
    p.set_defaults(func=cmd_translate)

    p = sub.add_parser("evaluate", parents=[common], help="score a checkpoint with sacreBLEU")
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--split", help="a test set named in the checkpoint's data.test, or valid "
                   "(default: the first test set, test_2016_flickr for Multi30k)")
    p.add_argument("--src", help="score this source file (plain or .gz, a sentence per line)")
    p.add_argument("--ref", help="the references of --src, line by line")
    p.add_argument("--output", help="write the detokenized translations here")
    p.add_argument("--beam", type=int, help="beam size (default: decode.beam_size)")
    p.add_argument("--data-dir", help="local directory with the Multi30k .gz files")
    p.add_argument("--max-sentences", type=int, help="score only the first N sentences")
    p.add_argument("--device", default="auto", help="auto, cpu or cuda")
    p.add_argument("--json", action="store_true", help="print one JSON record")
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("export", parents=[common],
                       help="convert a checkpoint for an inference engine (CTranslate2)")
    p.add_argument("checkpoint")
    p.add_argument("output_dir")
    p.add_argument("--format", choices=["ctranslate2"], default="ctranslate2")
    p.add_argument("--quantization", choices=["int8", "int8_float32", "float16", "bfloat16"],
                   help="store the weights quantized (default: float32, as trained)")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("average", parents=[common], help="average the weights of checkpoints")
    p.add_argument("checkpoints", nargs="+")
    p.add_argument("--output", required=True)
    p.set_defaults(func=cmd_average)

    p = sub.add_parser("plot", parents=[common], help="plot loss, BLEU and lr of a run")
    p.add_argument("run_dir")
    p.add_argument("--output", help="directory for the PNGs (default: RUN_DIR/plots)")
    p.set_defaults(func=cmd_plot)

    p = sub.add_parser("trace", parents=[common],
                       help="walk one sentence through every stage of the model")
    p.add_argument("sentence")
    p.add_argument("--checkpoint", help="a trained checkpoint (default: a seeded untrained "
                   "model)")
    p.add_argument("--figures", metavar="DIR", help="save attention maps of every layer and "
                   "head, and the positional encoding, here")
    p.add_argument("--data-dir", help="Multi30k (for the untrained model's vocabularies)")
    p.add_argument("--device", default="auto", help="auto, cpu or cuda")
    p.set_defaults(func=cmd_trace)

    p = sub.add_parser("info", parents=[common], help="describe a checkpoint")
    p.add_argument("checkpoint")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_info)
    return parser


class _DefaultsFormatter(argparse.HelpFormatter):
    """Help that ends with the option's default, where it has one and does not say it."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.default not in (None, False, argparse.SUPPRESS) and "default" not in text:
            text += " (default: %(default)s)"
        return text


class _CommandParser(argparse.ArgumentParser):
    """A command's parser: its --help shows every option's default."""

    def __init__(self, **kwargs: object) -> None:
        kwargs.setdefault("formatter_class", _DefaultsFormatter)
        super().__init__(**kwargs)  # type: ignore[arg-type]


def main(argv: list[str] | None = None) -> int:
    from transformer_mt.logs import setup_logging

    args = build_parser().parse_args(argv)
    setup_logging(args.quiet, args.debug)
    for name in ("beam", "nbest", "max_sentences"):
        value = getattr(args, name, None)
        if value is not None and value < 1:
            print(f"mt {args.command}: error: --{name.replace('_', '-')} must be at least 1",
                  file=sys.stderr)
            return EXIT_ERROR
    try:
        return args.func(args)
    except MTError as exc:
        if args.debug:
            raise
        print(f"mt {args.command}: error: {exc}", file=sys.stderr)
        return getattr(exc, "exit_code", EXIT_ERROR)
    except KeyboardInterrupt:
        print(f"mt {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except OSError as exc:
        if args.debug:
            raise
        print(f"mt {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
