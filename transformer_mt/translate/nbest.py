"""N-best lists of different translations.

A model trained on sampled segmentations (SentencePiece's subword regularization, as
config/cpu.yaml trains) writes one text in several ways, "bicycle" as one piece or as two, each
a hypothesis of its own: a beam's five best held "A man is riding a bicycle on the street."
three times. A list of n translations is n different texts: of each text its best scored
writing, and where fewer than n differ, the search again twice as wide (then four times, as
``translate(nbest=n)`` and ``mt translate`` do; ``mt serve`` within its ``max_beam``), the
first translation staying the one the narrower search found (what one translation alone is),
the others best first.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable

from transformer_mt.config import DecodeConfig
from transformer_mt.decode.search import best_first
from transformer_mt.translate.results import Translation

# the translations of each source with these settings and this many best
Decode = Callable[[DecodeConfig, int], list[list[Translation]]]


def distinct(translations: Iterable[Translation]) -> list[Translation]:
    """``translations`` without the texts that stand before them (each text's first)."""
    firsts: dict[str, Translation] = {}
    for t in translations:
        firsts.setdefault(t.text, t)
    return list(firsts.values())


def different(decode: Decode, cfg: DecodeConfig, nbest: int, widest: int
               ) -> list[list[Translation]]:
    """Up to ``nbest`` different translations of each source, found by ``decode``: where a
    search gave as many hypotheses as asked but fewer different texts, again with a beam and
    n-best twice as wide (sampling: twice as many draws), up to ``widest``."""
    found = decode(cfg, nbest)
    lists = [distinct(hyps)[:nbest] for hyps in found]
    more = [len(hyps) >= nbest for hyps in found]  # the search might find others
    width = nbest
    while 2 * width <= widest and any(
            m and len(t) < nbest for m, t in zip(more, lists, strict=True)):
        width *= 2  # (sampling: more draws, the first ones again among them)
        wider = decode(cfg if cfg.samples else dataclasses.replace(
            cfg, beam_size=max(cfg.beam_size, width)), width)
        for i, hyps in enumerate(wider):
            if more[i] and len(lists[i]) < nbest:
                first, *rest = distinct([*lists[i], *hyps])
                lists[i] = [first, *sorted(rest, key=best_first)][:nbest]
                more[i] = len(hyps) >= width
    return lists


