"""Models in and out of the project, as commands: ``mt export`` (for CTranslate2, or as a
Hugging Face transformers model) and ``mt import`` (a transformers Marian or Pegasus model, such
as OPUS-MT's, as a checkpoint of ours). The conversions are ``export.py``'s and
``huggingface.py``'s."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from transformer_mt.errors import MTError


def cmd_export(args: argparse.Namespace) -> int:
    if args.format != "ctranslate2" and args.quantization:
        raise MTError(f"--quantization is CTranslate2's; --format {args.format} stores the "
                      "weights as trained")
    if args.format == "argos":
        from transformer_mt.argos import export_argos

        out = export_argos(args.checkpoint, args.output_dir, args.overwrite)
        print(f"exported {args.checkpoint} to {out}; install it with argos-translate "
              f"(argostranslate.package.install_from_path('{out}')) and translate with "
              "ARGOS_CHUNK_TYPE=SPACY set")
        return 0
    if args.format == "huggingface":
        from transformer_mt.huggingface import export_huggingface

        out = export_huggingface(args.checkpoint, args.output_dir, args.overwrite)
        print(f"exported {args.checkpoint} to {out}; load it with transformers: "
              f"AutoModelForSeq2SeqLM.from_pretrained('{out}') and AutoTokenizer too")
        return 0
    from transformer_mt.export import export_ctranslate2

    out = export_ctranslate2(args.checkpoint, args.output_dir, args.quantization,
                             args.overwrite)
    print(f"exported {args.checkpoint} to {out}; translate with: mt translate --engine "
          f"ctranslate2 --checkpoint {out} ...")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from transformer_mt.checkpoint import load_checkpoint
    from transformer_mt.fileio import atomic_write_text
    from transformer_mt.huggingface_import import import_huggingface

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
