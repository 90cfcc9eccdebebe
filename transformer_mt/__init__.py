"""transformer_mt: a from-scratch Transformer that learns to translate, and a tool around it.

From Python::

    from transformer_mt import Translator, load_config, train

    progress = train(load_config("config/quickstart.yaml"), "runs/quickstart")
    translator = Translator.load("runs/quickstart/best.pt")
    print(translator.translate(["Ein Hund läuft."]))

The names are imported on first use, so ``import transformer_mt`` (and ``mt --help``) stays
light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["Glossary", "Memory", "Translator", "__version__", "load_config", "train"]

if TYPE_CHECKING:
    from transformer_mt.config.file import load_config
    from transformer_mt.training.trainer import train
    from transformer_mt.translate import Translator
    from transformer_mt.translate.glossary import Glossary
    from transformer_mt.translate.memory import Memory


def __getattr__(name: str) -> Any:
    if name == "Translator":
        from transformer_mt.translate import Translator

        return Translator
    if name == "Glossary":
        from transformer_mt.translate.glossary import Glossary

        return Glossary
    if name == "Memory":
        from transformer_mt.translate.memory import Memory

        return Memory
    if name == "train":
        from transformer_mt.training.trainer import train

        return train
    if name == "load_config":
        from transformer_mt.config.file import load_config

        return load_config
    raise AttributeError(f"module 'transformer_mt' has no attribute {name!r}")
