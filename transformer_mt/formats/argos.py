"""A checkpoint as an Argos Translate package (``mt export --format argos CKPT FILE.argosmodel``),
which argos-translate installs and LibreTranslate serves.

The package is a zip of one directory: ``metadata.json`` (languages, versions),
``model/`` (the CTranslate2 export, ``ctranslate2.py``), ``sentencepiece.model`` (argos encodes the
source and decodes the output with one model: models with one vocabulary only) and ``spacy/``
(a blank spaCy pipeline of the source language, on which argos puts its sentencizer: sentence
splitting with no download; argos takes it with ``ARGOS_CHUNK_TYPE=SPACY``), and a README.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import zipfile
from pathlib import Path

from transformer_mt.checkpoint import checkpoint_config, load_checkpoint, subword_models_of
from transformer_mt.config.languages import language_name
from transformer_mt.errors import MTError
from transformer_mt.formats.ctranslate2 import export_ctranslate2

log = logging.getLogger(__name__)

SUFFIX = ".argosmodel"


def export_argos(checkpoint: str | Path, out_file: str | Path, overwrite: bool = False) -> Path:
    """Write the package ``out_file`` (see the module's docstring), whole or not at all."""
    out = Path(out_file)
    if out.suffix != SUFFIX:
        raise MTError(f"an Argos package is a {SUFFIX} file; name it e.g. de_en{SUFFIX}")
    if out.exists() or out.is_symlink():
        if not (out.is_file() and not out.is_symlink() and _is_package(out)):
            raise MTError(f"'{out}' exists and is not an Argos package; name a new file "
                          "(nothing but an earlier package is ever replaced)")
        if not overwrite:
            raise MTError(f"'{out}' exists; pass --overwrite to replace it, or name a new one")
    ckpt = load_checkpoint(checkpoint)
    config = checkpoint_config(ckpt, checkpoint)
    models = subword_models_of(ckpt)
    if models is None or not config.data.shared_vocab:
        raise MTError("Argos Translate reads the source and writes the output with one "
                      "SentencePiece model: export a model trained with data.tokenizer: "
                      "sentencepiece and data.shared_vocab: true")
    if config.data.lowercase:
        raise MTError("Argos Translate feeds the text as it is typed, and this model was "
                      "trained on lowercased text (data.lowercase): export a cased model")
    import spacy  # a dependency of ours, and of argos-translate

    src, tgt = config.data.src_lang, config.data.tgt_lang
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{out.name}.", dir=out.parent) as tmp:
        root = Path(tmp) / f"{src}_{tgt}"
        export_ctranslate2(checkpoint, root / "model")
        (root / "sentencepiece.model").write_bytes(models[0])
        spacy.blank(src).to_disk(root / "spacy")  # argos adds its sentencizer
        step = ckpt.get("progress", {}).get("step", 0)
        metadata = {"package_version": f"1.{step}", "argos_version": "1.9",
                    "from_code": src, "from_name": language_name(src), "to_code": tgt,
                    "to_name": language_name(tgt), "type": "translate",
                    "source_languages": [{"code": src, "name": language_name(src)}],
                    "target_languages": [{"code": tgt, "name": language_name(tgt)}]}
        (root / "metadata.json").write_text(json.dumps(metadata, indent=1), encoding="utf-8")
        (root / "README.md").write_text(
            f"# {language_name(src)} → {language_name(tgt)}\n\nTrained with transformer_mt "
            f"({config.name}, step {step}) and exported with `mt export --format argos`. "
            "Install with argos-translate; translate with `ARGOS_CHUNK_TYPE=SPACY` (sentence "
            "splitting from the package, no download).\n", encoding="utf-8")
        partial = Path(tmp) / f"package{SUFFIX}"
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as z:
            for path in sorted(root.rglob("*")):
                z.write(path, path.relative_to(root.parent))
        os.replace(partial, out)  # the same filesystem: whole, or not at all
    log.info("exported %s to %s (Argos Translate package, %s → %s)", checkpoint, out, src, tgt)
    return out


def _is_package(path: Path) -> bool:
    """Whether ``path`` is an Argos package (a zip with a top folder's metadata.json)."""
    try:
        with zipfile.ZipFile(path) as z:
            return any(name.count("/") == 1 and name.endswith("/metadata.json")
                       for name in z.namelist())
    except (zipfile.BadZipFile, OSError):
        return False
