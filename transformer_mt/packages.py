"""The Python packages a command needs, checked before it starts.

Some packages are imported only where they are used (spaCy takes a second to import, and a
translation needs neither SentencePiece nor TensorBoard). A missing one would then surface
deep inside a run: sacremoses, say, at the first validation 200 steps into training. So each
command asks :func:`require` for what its config will use, before the first step, and a missing
package ends it in one line that names the package and the install command.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from typing import Any

from transformer_mt.config import Config
from transformer_mt.config.data import DataConfig
from transformer_mt.errors import MTError

# module name -> what pip installs it by: the project's dependencies by name (`make setup`
# installs them), its optional ones through the project's extras
PIP_NAMES = {"yaml": "PyYAML", "sacremoses": "sacremoses", "spacy": "spacy",
             "sentencepiece": "sentencepiece", "sacrebleu": "sacrebleu",
             "matplotlib": "'transformer_mt[plot]'", "tensorboard": "'transformer_mt[tensorboard]'",
             "ctranslate2": "'transformer_mt[ct2]'", "py3langid": "'transformer_mt[langid]'",
             "transformers": "'transformer_mt[huggingface]'", "redis": "'transformer_mt[shared]'",
             **dict.fromkeys(["srt", "markdown_it", "lxml", "polib", "docx", "pptx",
                              "odf.opendocument", "pdfminer", "pypdf", "reportlab", "uharfbuzz",
                              "fontTools", "bidi"], "'transformer_mt[files]'")}


class MissingPackageError(MTError):
    """A Python package the command needs is not installed."""


def tokenizer_packages(data: DataConfig) -> dict[str, str]:
    """What the tokenizers of ``data`` need: module -> what for."""
    if data.tokenizer == "sentencepiece":
        return {"sentencepiece": "data.tokenizer=sentencepiece"}
    return {"spacy": "data.tokenizer=spacy (tokenizing)",
            "sacremoses": "data.tokenizer=spacy (detokenizing translations)"}


def training_packages(config: Config) -> dict[str, str]:
    """What ``mt train`` with ``config`` needs, validation and logging included."""
    needs = {**tokenizer_packages(config.data), "sacrebleu": "validation BLEU"}
    if config.train.tensorboard:
        needs["tensorboard"] = "train.tensorboard"
    if config.data.filter.language:
        needs["py3langid"] = "data.filter.language"
    return needs


def require(needs: dict[str, str]) -> None:
    """Raise :class:`MissingPackageError` naming every module of ``needs`` that is missing."""
    missing = [name for name in needs if not installed(name)]
    if missing:
        raise missing_error(missing, [needs[m] for m in missing])


def imported(module: str, what_for: str) -> Any:
    """``module``, imported; or a :class:`MissingPackageError` naming it and its extra."""
    require({module: what_for})
    return importlib.import_module(module)


def installed(module: str) -> bool:
    """Whether ``module`` can be imported (checked without importing it)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing, or a module set to None
        return False


def missing_error(modules: list[str], reasons: list[str] | None = None) -> MissingPackageError:
    names = [PIP_NAMES.get(m, m) for m in modules]
    why = f" (needed for {'; '.join(reasons)})" if reasons else ""
    extras = any(n.startswith("'") for n in names)
    return MissingPackageError(
        f"the Python package{'s' if len(names) > 1 else ''} {', '.join(modules)} "
        f"{'are' if len(names) > 1 else 'is'} not installed{why}; install with "
        f"`{sys.executable} -m pip install {' '.join(names)}`"
        + ("" if extras else " (or `make setup`)"))
