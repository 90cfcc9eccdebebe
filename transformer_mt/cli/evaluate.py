"""The commands that score: ``mt evaluate`` (translations against references, one system or
several compared) and ``mt score`` (how probable a model finds given translations).
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from transformer_mt.cli.flags import (
    DEVICE_HELP,
    ENGINE_HELP,
    ENGINES,
    add_decoding_flags,
    add_workers_flag,
)
from transformer_mt.config import per_call_settings
from transformer_mt.errors import MTError
from transformer_mt.fileio import STD_STREAM, not_an_input
from transformer_mt.logs import bars_enabled

if TYPE_CHECKING:
    from transformer_mt.compare import System
    from transformer_mt.evaluate import Scores
    from transformer_mt.translate import Translator


def add(sub: Any, common: argparse.ArgumentParser) -> None:
    """``mt evaluate`` and ``mt score``."""
    _add_evaluate(sub, common)
    _add_score(sub, common)


def _add_evaluate(sub: Any, common: argparse.ArgumentParser) -> None:
    """``mt evaluate``."""
    p = sub.add_parser("evaluate", parents=[common],
                       help="score a checkpoint with sacreBLEU, or compare several")
    p.add_argument("--checkpoint", action="append",
                   help="a checkpoint to translate and score, or a directory mt export wrote "
                   "(decoded with CTranslate2); repeat it to compare them (paired bootstrap "
                   "resampling against the first), or with --ensemble")
    p.add_argument("--ensemble", action="store_true", help="score the --checkpoint models as "
                   "one ensemble (their probabilities averaged, as mt translate does with "
                   "several), not each apart")
    p.add_argument("--hyp", action="append",
                   help="a file of translations to score (or compare) as they are, against "
                   "--ref or the checkpoints' references; repeatable ('-': standard input)")
    p.add_argument("--split", help="a test set named in the checkpoint's data.test, or valid "
                   "(default: the first test set, test_2016_flickr for Multi30k)")
    p.add_argument("--src", help="score this source file (plain or .gz, a sentence per line)")
    p.add_argument("--ref", help="the references of --src, line by line")
    p.add_argument("--output", help="write the detokenized translations here")
    add_decoding_flags(p)
    p.add_argument("--data-dir", help="local directory with the Multi30k .gz files")
    p.add_argument("--max-sentences", type=int, help="score only the first N sentences")
    p.add_argument("--device", default="auto", help=DEVICE_HELP)
    add_workers_flag(p)
    p.add_argument("--json", action="store_true", help="print one JSON record")
    p.set_defaults(func=cmd_evaluate)


def _add_score(sub: Any, common: argparse.ArgumentParser) -> None:
    """``mt score``."""
    p = sub.add_parser("score", parents=[common],
                       help="how probable a model finds given translations, token by token")
    p.add_argument("--checkpoint", required=True, action="append", help="a checkpoint (.pt), "
                   "or a directory mt export wrote; repeat it to score with an ensemble (the "
                   "models' mean probability)")
    p.add_argument("--src", required=True, help="the source sentences, one a line")
    p.add_argument("--hyp", required=True, help="their translations to score, line by line "
                   "('-': standard input; a pipe such as <(sed ...) is read too)")
    add_decoding_flags(p, ["alpha", "precision", "replace_unk"])
    p.add_argument("--engine", choices=ENGINES, default="auto", help=ENGINE_HELP)
    p.add_argument("--max-sentences", type=int, help="score only the first N pairs")
    p.add_argument("--device", default="auto", help=DEVICE_HELP)
    p.add_argument("--json", action="store_true", help="a JSON record a line: log_prob, score, "
                   "tokens, token_log_probs")
    p.set_defaults(func=cmd_score)

log = logging.getLogger("transformer_mt.cli")


def cmd_evaluate(args: argparse.Namespace) -> int:
    from transformer_mt.evaluate import decode_and_score
    from transformer_mt.fileio import atomic_write_text, refuse_same_file
    from transformer_mt.translate import Translator

    checkpoints, hyp_files = args.checkpoint or [], args.hyp or []
    _check_evaluate_args(args, checkpoints)
    refuse_same_file(args.output, [*checkpoints, *hyp_files, args.src, args.ref])
    if args.ensemble:  # one system: the models' probabilities averaged
        names = ["ensemble of " + ", ".join(checkpoints)]
        translators = [Translator.load(checkpoints, args.device, workers=args.workers)]
    else:
        names, translators = checkpoints, [Translator.load(c, args.device, workers=args.workers)
                                           for c in checkpoints]
    name, sources, refs = _test_set(args, translators)
    from transformer_mt.compare import System
    from transformer_mt.evaluate import score

    systems: list[System] = []
    scores: list[Scores | None] = []
    beam = alpha = None
    copies = False  # a word model's <unk> written as source words (decode.replace_unk)
    ends = None  # each translation ending as its source ends (decode.end_as_source)
    settings = {f.name: getattr(args, f.name) for f in per_call_settings()}
    for path, translator in zip(names, translators, strict=True):
        result = decode_and_score(translator, refs, sources, progress=bars_enabled(),
                                  **settings)
        systems.append(System(str(path), result.hypotheses, translator.config.data.lowercase))
        scores.append(result.scores)
        beam, alpha = result.settings.beam_size, result.settings.alpha
        copies = result.settings.replace_unk and not translator.tokenizers[1].subword
        ends = result.settings.end_as_source
    for f in hyp_files:  # a file is scored as it is, against the references as they are
        systems.append(System(_shown(f), _lines(f, "--hyp", args.max_sentences)))
        scores.append(None)
    if args.output:
        atomic_write_text(args.output, "".join(h + "\n" for h in systems[0].hypotheses))
        log.info("wrote %d translations to %s", len(systems[0].hypotheses), args.output)
    lang = translators[0].config.data.tgt_lang if translators else None
    if len(systems) > 1:
        return _print_comparison(systems, refs, lang, name, beam, args.json)
    s = scores[0] or score(systems[0].hypotheses, refs, lang)
    lowercased = systems[0].lowercase
    scored = {"ensemble": checkpoints} if args.ensemble else {
        ("checkpoint" if checkpoints else "hypotheses"): systems[0].name}
    summary = {**scored, "split": name,
               "sentences": len(refs), "beam_size": beam, "alpha": alpha, "unk_copied": copies,
               "end_as_source": ends,
               "references": "lowercased" if lowercased else "as given", **s.as_dict()}
    if args.json:
        print(json.dumps(summary))
        return 0
    _print_scores(summary, s, len(checkpoints) if args.ensemble else 0)
    return 0


def _print_scores(summary: dict[str, Any], s: Scores, ensemble: int) -> None:
    """``mt evaluate``'s scores as text: what was scored, how, and the scores."""
    print(f"{summary['split']} ({summary['sentences']} sentences"
          + (f", beam {summary['beam_size']}" if summary["beam_size"] else "")
          + (f", an ensemble of {ensemble} models" if ensemble else "")
          + (", each <unk> written as a source word" if summary["unk_copied"] else "")
          + (", each ending as its source ends" if summary["end_as_source"] else "")
          + (", references lowercased as the model's output is):"
             if summary["references"] == "lowercased" else "):"))
    print(f"  {s.bleu_text}")
    print(f"  chrF2 = {s.chrf:.2f}")
    print(f"  signatures: {s.bleu_signature} | {s.chrf_signature}")


def _check_evaluate_args(args: argparse.Namespace, checkpoints: list[str]) -> None:
    """Refuse, in one line, what ``mt evaluate`` cannot do with these arguments."""
    if not checkpoints and not args.hyp:
        raise MTError("give --checkpoint (repeat it to compare checkpoints) or --hyp files "
                      "with --ref")
    if checkpoints and (args.src is None) != (args.ref is None):
        raise MTError("pass --src and --ref together (the source file and its references)")
    if args.src is not None and args.split is not None:
        raise MTError("pass either --split NAME or --src/--ref files, not both")
    if not checkpoints and args.ref is None:
        raise MTError("--hyp files are scored against references: pass --ref")
    _read_once([args.src, args.ref, *(args.hyp or [])], "--src, --ref and --hyp")
    if args.ensemble and len(checkpoints) < 2:
        raise MTError("--ensemble averages the probabilities of two or more --checkpoint models")
    if args.output == STD_STREAM:
        raise MTError("--output writes the translations to a file (the scores go to standard "
                      "output): give it a file's name")
    if args.output and len(checkpoints) != 1 and not args.ensemble:
        raise MTError("--output writes the translations of one --checkpoint (or of an "
                      "--ensemble)")


def _test_set(args: argparse.Namespace, translators: list[Translator],
              ) -> tuple[str, list[str] | None, list[str]]:
    """What is scored: its name, its sources (None for --hyp files alone) and references;
    --src/--ref files, or a test set of the (first) checkpoint's config."""
    from transformer_mt.evaluate import read_test_set

    if args.ref is not None:
        sources = _lines(args.src, "--src", args.max_sentences) if args.src else None
        return _shown(args.src or args.ref), sources, _lines(args.ref, "--ref",
                                                              args.max_sentences)
    tests = translators[0].config.data.test_sets()
    name = args.split or next(iter(tests), None)
    if name is None:
        raise MTError("the checkpoint's config names no test sets (data.test); pass --src "
                      "and --ref files, or --split valid")
    if name == "val" and "val" not in tests:
        name = "valid"
    sources, refs = read_test_set(translators[0], name, args.max_sentences, args.data_dir)
    return name, sources, refs


def _read_once(paths: list[str | None], flags: str) -> None:
    """Refuse standard input ('-') named twice: it is read only once."""
    if paths.count(STD_STREAM) > 1:
        raise MTError(f"standard input ('-') is read once: give it to one of {flags}")


def _shown(path: str) -> str:
    """A file's name as the output shows it."""
    return "standard input" if path == STD_STREAM else path


def _lines(path: str, flag: str, limit: int | None) -> list[str]:
    """The lines of a --src/--ref/--hyp file (its first ``limit``), checked; '-' or a pipe
    is read too."""
    from transformer_mt.data.corpus import read_lines

    why = not_an_input(Path(path))
    if why:
        raise MTError(f"{flag} file '{path}' {why}")
    lines = list(read_lines(Path(path)))
    if not lines:
        raise MTError(f"{flag} file '{path}' is empty; nothing to score")
    return lines[:limit] if limit else lines


def _print_comparison(systems: list[System], refs: list[str], lang: str | None,
                      name: str, beam: int | None, as_json: bool) -> int:
    from transformer_mt.compare import SAMPLES, compare_systems

    comparison = compare_systems(systems, refs, lang)
    if as_json:
        print(json.dumps({"split": name, "beam_size": beam, **comparison.as_dict()}))
        return 0
    print(f"{name} ({len(refs)} sentences{f', beam {beam}' if beam else ''}): paired bootstrap "
          f"resampling ({SAMPLES} samples) against {systems[0].name}; score (mean ± 95% "
          "interval), p-value (*: p < 0.05)")
    print(comparison.table())
    print("signatures: " + " | ".join(f"{m}: {s}" for m, s in comparison.signatures.items()))
    return 0


def cmd_score(args: argparse.Namespace) -> int:
    from transformer_mt.translate import Translator

    _read_once([args.src, args.hyp], "--src and --hyp")
    sources = _lines(args.src, "--src", args.max_sentences)
    translations = _lines(args.hyp, "--hyp", args.max_sentences)
    translator = Translator.load(args.checkpoint, args.device, engine=args.engine)
    scored = translator.score(sources, translations, strict=True, alpha=args.alpha,
                              precision=args.precision, replace_unk=args.replace_unk)
    for s in scored:
        if args.json:
            print(json.dumps({"log_prob": round(s.log_prob, 5), "score": round(s.score, 5),
                              "alpha": s.alpha, "tokens": s.tokens,
                              "token_log_probs": [round(x, 5) for x in s.log_probs]},
                             ensure_ascii=False))
        else:
            print(f"{s.score:.4f}\t{s.log_prob:.4f}\t" + " ".join(
                f"{t}:{x:.3f}" for t, x in zip(s.tokens, s.log_probs, strict=True)))
    return 0
