"""Models in and out of the project: ``mt export`` (for CTranslate2, as a Hugging Face
transformers model, or as an Argos Translate package) and ``mt import`` (a transformers Marian
or Pegasus model, such as OPUS-MT's, as a checkpoint of ours). The conversions are the
``formats`` package's.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from transformer_mt.errors import MTError


def add(sub: Any, common: argparse.ArgumentParser) -> None:
    """``mt export`` and ``mt import``."""
    _add_export(sub, common)
    _add_import(sub, common)


def _add_export(sub: Any, common: argparse.ArgumentParser) -> None:
    """``mt export``."""
    p = sub.add_parser("export", parents=[common],
                       help="convert a checkpoint for CTranslate2 or Hugging Face transformers")
    p.add_argument("checkpoint")
    p.add_argument("output_dir", metavar="OUTPUT",
                   help="the directory to write (argos: the .argosmodel file)")
    p.add_argument("--format", choices=["ctranslate2", "huggingface", "argos"],
                   default="ctranslate2",
                   help="ctranslate2: for mt translate --engine ctranslate2 (and CTranslate2 "
                   "itself); huggingface: a transformers model directory (SentencePiece "
                   "models); argos: an Argos Translate package file (.argosmodel; SentencePiece "
                   "models of one vocabulary), which LibreTranslate serves")
    p.add_argument("--quantization", choices=["int8", "int8_float32", "float16", "bfloat16"],
                   help="ctranslate2: store the weights quantized (default: float32, as "
                   "trained)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an earlier export in OUTPUT_DIR (nothing else is replaced)")
    p.set_defaults(func=cmd_export)


def _add_import(sub: Any, common: argparse.ArgumentParser) -> None:
    """``mt import``."""
    p = sub.add_parser("import", parents=[common],
                       help="a Hugging Face Marian or Pegasus model (e.g. OPUS-MT) as a "
                       "checkpoint to translate with and fine-tune")
    p.add_argument("directory", help="the transformers model directory (with its "
                   "MarianTokenizer files: source.spm, target.spm, vocab.json)")
    p.add_argument("checkpoint", help="the checkpoint to write (.pt); a config to fine-tune "
                   "it with is written beside it (.finetune.yaml)")
    p.add_argument("--src-lang", help="the source language, where the model does not say")
    p.add_argument("--tgt-lang", help="the target language, where the model does not say")
    p.add_argument("--overwrite", action="store_true", help="replace an existing checkpoint")
    p.set_defaults(func=cmd_import)


def cmd_export(args: argparse.Namespace) -> int:
    if args.format != "ctranslate2" and args.quantization:
        raise MTError(f"--quantization is CTranslate2's; --format {args.format} stores the "
                      "weights as trained")
    if args.format == "argos":
        from transformer_mt.formats.argos import export_argos

        out = export_argos(args.checkpoint, args.output_dir, args.overwrite)
        print(f"exported {args.checkpoint} to {out}; install it with argos-translate "
              f"(argostranslate.package.install_from_path('{out}')) and translate with "
              "ARGOS_CHUNK_TYPE=SPACY set")
        return 0
    if args.format == "huggingface":
        from transformer_mt.formats.huggingface import export_huggingface

        out = export_huggingface(args.checkpoint, args.output_dir, args.overwrite)
        print(f"exported {args.checkpoint} to {out}; load it with transformers: "
              f"AutoModelForSeq2SeqLM.from_pretrained('{out}') and AutoTokenizer too")
        return 0
    from transformer_mt.formats.ctranslate2 import export_ctranslate2

    out = export_ctranslate2(args.checkpoint, args.output_dir, args.quantization,
                             args.overwrite)
    print(f"exported {args.checkpoint} to {out}; translate with: mt translate --checkpoint "
          f"{out} ...; compare: mt evaluate --checkpoint {args.checkpoint} --checkpoint {out}")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from transformer_mt.checkpoint import load_checkpoint
    from transformer_mt.fileio import atomic_write_text
    from transformer_mt.formats.huggingface_import import import_huggingface

    out = import_huggingface(args.directory, args.checkpoint, args.src_lang, args.tgt_lang,
                             args.overwrite)
    # a config to fine-tune it with: the model's sections, your corpora
    config = load_checkpoint(out)["config"]
    config["name"] = f"{Path(out).stem}-finetuned"
    config["train"]["init_from"] = str(out)
    finetune = Path(out).with_suffix(".finetune.yaml")
    import yaml

    atomic_write_text(finetune, "# fine-tune the imported model: set data.train and data.valid "
                      "to your corpora\n" + yaml.safe_dump(json.loads(json.dumps(config)),
                                                          sort_keys=False, allow_unicode=True))
    print(f"imported {args.directory} into {out}; translate with: mt translate --checkpoint "
          f"{out} ...; fine-tune with: mt train --config {finetune} (set your corpora in it)")
    return 0
