"""Which language a request names and its texts are in: the routes' checks of a request's
source and target (LibreTranslate's codes too) and language identification (py3langid)."""

from __future__ import annotations

import functools
from typing import Any

from transformer_mt.serve.errors import RequestError
from transformer_mt.translate.language_tags import says

LIBRE_CODES = {"pb": "pt-BR", "zt": "zh-Hant"}  # LibreTranslate's, sent by clients before 1.7.2


class LanguageChecks:
    """The service's checks of languages (:class:`~transformer_mt.serve.service.Service`'s)."""

    src_lang: str
    tgt_lang: str

    def detect(self, text: str, n: int = 3) -> list[tuple[str, float]]:
        """The ``n`` most likely languages of ``text`` with their probabilities (py3langid)."""
        return identifier().rank(text)[:n]

    def check_pair(self, source: str, target: str) -> None:
        """LibreTranslate's routes name the languages: this model's, as any tag of it ("de",
        "de-DE", "EN", "zh-Hans"; LibreTranslate's own "pb" and "zt" for "pt" and "zh"),
        ``auto`` for the source; or a 400 as LibreTranslate words it."""
        for name, value in (("source", source), ("target", target)):
            if not value.strip():
                raise RequestError(400, f"Invalid request: missing {name} parameter")
        if not (says(LIBRE_CODES.get(target.lower(), target), self.tgt_lang) and (
                source.lower() == "auto" or says(LIBRE_CODES.get(source.lower(), source),
                                                 self.src_lang))):
            raise RequestError(400, f"this model translates {self.src_lang} into "
                               f"{self.tgt_lang}, not {source} into {target}")

    def check_source(self, texts: list[str]) -> tuple[str, float]:
        """``source: auto``: the texts are in the model's source language or clearly in its
        target language (which, with the confidence, 0-100), or a 400 that says which language
        they look like. Short texts are ambiguous: only a clear other language is refused."""
        sample = " ".join(texts)[:2000]
        if not sample.strip():
            return self.src_lang, 0.0
        ranked = identifier().rank(sample)
        ours = dict(ranked).get(self.src_lang, 0.0)
        best, p = ranked[0]
        if best == self.tgt_lang and ours < 0.5 * p:  # already translated
            return best, round(100 * p, 2)
        if best != self.src_lang and ours < 0.5 * p:
            raise RequestError(400, f"the text looks like {best} ({100 * p:.0f}% confidence); "
                               f"this model translates {self.src_lang} into {self.tgt_lang}")
        return self.src_lang, round(100 * ours, 2)


@functools.lru_cache(maxsize=1)
def identifier() -> Any:
    """py3langid's identifier with probabilities (its model ships inside the package)."""
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
