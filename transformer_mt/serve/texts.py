"""What a request's texts become on their way through the server: :class:`Prepared`
sentences (split, tokenized) for the worker, and :class:`TextResult`\\ s, each text rebuilt
around its sentences' translations."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from transformer_mt.translate import Translation
from transformer_mt.translate.documents import Document, Links


@dataclass
class Prepared:
    """A request's texts cut into sentences, and those sentences as source ids."""

    docs: Sequence[Document[Any]]
    ids: list[list[int]]


@dataclass
class TextResult:
    """One text's sentences with their translations (each a list of hypotheses, best first)."""

    doc: Document[Any]
    hyps: list[list[Translation]]
    # where a hypothesis reads in its sentence, by (sentence, hypothesis), for the sentences
    # that inline markup cuts (inline.py)
    links: dict[tuple[int, int], Links] = field(default_factory=dict)

    def text(self, k: int = 0) -> Any:
        """The text rebuilt with the ``k``-th hypothesis of each sentence (or its last)."""
        picked = [min(k, len(h) - 1) for h in self.hyps]
        return self.doc.rebuild([h[j].text for h, j in zip(self.hyps, picked, strict=True)],
                                [self.links.get((i, j)) for i, j in enumerate(picked)])

    def alternatives(self, n: int) -> list[str]:
        """Up to ``n`` translations of the whole text other than its best, each different."""
        seen = {self.text()}
        out: list[str] = []
        for k in range(1, max((len(h) for h in self.hyps), default=1)):
            text = self.text(k)
            if text not in seen and len(out) < n:
                seen.add(text)
                out.append(text)
        return out
