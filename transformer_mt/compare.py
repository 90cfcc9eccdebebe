"""Is a change real? Several systems' translations of the same sentences, scored with BLEU,
chrF and TER, and each compared with the first (the baseline) by paired bootstrap resampling
(Koehn, 2004): ``mt evaluate`` with several ``--checkpoint``/``--hyp``.

Each system is scored as it would be scored alone: against the references lowercased where
the system is a lowercasing model's (``data.lowercase``), as they are otherwise. The test is
sacreBLEU's (its metrics' sentence statistics, 1,000 resamples drawn with ``SACREBLEU_SEED``,
12345 by default, the same resamples for every system), so for systems scored against the same
references the table is the one ``sacrebleu REF -i A B -m bleu chrf ter --paired-bs`` prints,
with one difference: sacreBLEU calls a zero difference significant (p = 0.001 for a system
against itself); here the p-value counts resampled differences at least as large as the real
one, so identical systems get p = 1.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sacrebleu.metrics import CHRF, TER
from sacrebleu.metrics.base import Metric
from sacrebleu.significance import estimate_ci

from transformer_mt.errors import MTError
from transformer_mt.evaluate import bleu_metric

METRICS = ("BLEU", "chrF2", "TER")
SAMPLES = 1000  # sacreBLEU's default number of bootstrap resamples
SIGNIFICANT = 0.05


@dataclass
class System:
    name: str
    hypotheses: Sequence[str]  # detokenized, one per reference
    lowercase: bool = False  # a lowercasing model's: scored against lowercased references


@dataclass
class MetricResult:
    score: float
    mean: float | None = None  # the bootstrap estimate of the score
    ci: float | None = None  # half the 95% confidence interval
    p_value: float | None = None  # against the baseline (None for the baseline itself)


@dataclass
class Comparison:
    names: list[str]  # the systems, the baseline first
    lowercased: list[bool]  # per system: scored against lowercased references
    results: list[dict[str, MetricResult]]  # per system, per metric
    signatures: dict[str, str]
    sentences: int

    def as_dict(self) -> dict[str, Any]:
        return {"baseline": self.names[0], "sentences": self.sentences,
                "test": f"paired bootstrap resampling, {SAMPLES} samples",
                "systems": [{"name": n, "references": _refs(low),
                             **{m: vars(r[m]) for m in METRICS}}
                            for n, low, r in zip(self.names, self.lowercased, self.results,
                                                 strict=True)],
                "signatures": self.signatures}

    def table(self) -> str:
        """A text table: each score with its bootstrap mean and 95% interval, and the p-value
        against the baseline (``*``: significant at p < 0.05)."""
        width = max(12, *(len(n) for n in self.names))
        lines = [f"{'system':<{width}}  {'references':<10}  "
                 + "  ".join(f"{m:<34}" for m in METRICS)]
        for n, (name, low, result) in enumerate(zip(self.names, self.lowercased, self.results,
                                                    strict=True)):
            cells = []
            for m in METRICS:
                r = result[m]
                cell = f"{r.score:6.2f} ({r.mean:.1f} ± {r.ci:.1f})"
                if n:
                    star = "*" if r.p_value is not None and r.p_value < SIGNIFICANT else " "
                    cell += f" p={r.p_value:.4f}{star}"
                cells.append(f"{cell:<34}")
            lines.append(f"{name:<{width}}  {_refs(low):<10}  " + "  ".join(cells))
        return "\n".join(lines)


def _refs(lowercased: bool) -> str:
    return "lowercased" if lowercased else "as given"


def compare_systems(systems: Sequence[System], references: Sequence[str],
                    lang: str | None = None) -> Comparison:
    """Score each system's detokenized translations against ``references`` (lowercased for a
    lowercasing system) and test each against the first with paired bootstrap resampling."""
    if len(systems) < 2:
        raise MTError("comparing needs two systems or more (the first is the baseline)")
    names = [s.name for s in systems]
    if len(set(names)) != len(names):
        raise MTError(f"two systems have the same name ({', '.join(names)}); give each its own "
                      "file")
    for s in systems:
        if len(s.hypotheses) != len(references):
            raise MTError(f"'{s.name}' has {len(s.hypotheses):,} lines for "
                          f"{len(references):,} references; every system must translate the "
                          "same sentences")
    metrics: dict[str, Metric] = {"BLEU": bleu_metric(lang), "chrF2": CHRF(), "TER": TER()}
    seed = os.environ.get("SACREBLEU_SEED", "12345")
    rng = np.random.default_rng(None if seed.lower() == "none" else int(seed))
    resamples = rng.choice(len(references), size=(SAMPLES, len(references)), replace=True)
    lowered = [r.lower() for r in references]
    results: list[dict[str, MetricResult]] = [{} for _ in systems]
    for m, metric in metrics.items():
        real, drawn = [], []
        for k, s in enumerate(systems):
            refs = lowered if s.lowercase else list(references)
            stats = metric._extract_corpus_statistics(list(s.hypotheses), [refs])
            real.append(metric._aggregate_and_compute(stats).score)
            table = np.array(stats, dtype="float32")  # (sentences, statistics)
            drawn.append(np.array([metric._compute_score_from_stats(table[i].sum(0)).score
                                   for i in resamples]))
            mean, ci = estimate_ci(drawn[k])
            p = None if k == 0 else _p_value(real[0], real[k], drawn[0], drawn[k])
            results[k][m] = MetricResult(float(real[k]), float(mean), float(ci), p)
    return Comparison(names, [s.lowercase for s in systems], results,
                      {m: str(metric.get_signature()) for m, metric in metrics.items()},
                      len(references))


def _p_value(base: float, score: float, base_drawn: np.ndarray, drawn: np.ndarray) -> float:
    """sacreBLEU's paired bootstrap p-value: how often the resampled absolute difference,
    centred on its mean, is at least the real one (at least, not more: a zero difference is
    no evidence of one)."""
    differences = np.abs(drawn - base_drawn)
    extreme = np.sum(differences - differences.mean() >= abs(score - base)).item()
    return (extreme + 1) / (len(differences) + 1)
