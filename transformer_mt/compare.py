"""Is a change real? Several systems' translations of the same sentences, scored with BLEU,
chrF and TER, and each compared with the first (the baseline) by sacreBLEU's paired bootstrap
resampling (Koehn, 2004): ``mt evaluate`` with several ``--checkpoint``/``--hyp``.

The test is sacreBLEU's own (``sacrebleu.significance.PairedTest``, 1,000 resamples, its seed:
``SACREBLEU_SEED``, 12345 by default), so the table is the one ``sacrebleu REF -i A B -m bleu
chrf ter --paired-bs`` prints for the same files.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sacrebleu.metrics import CHRF, TER
from sacrebleu.significance import PairedTest

from transformer_mt.errors import MTError
from transformer_mt.evaluate import bleu_metric

METRICS = ("BLEU", "chrF2", "TER")
SAMPLES = 1000  # sacreBLEU's default number of bootstrap resamples
SIGNIFICANT = 0.05


@dataclass
class MetricResult:
    score: float
    mean: float | None = None  # the bootstrap estimate of the score
    ci: float | None = None  # half the 95% confidence interval
    p_value: float | None = None  # against the baseline (None for the baseline itself)


@dataclass
class Comparison:
    names: list[str]  # the systems, the baseline first
    results: list[dict[str, MetricResult]]  # per system, per metric
    signatures: dict[str, str]
    sentences: int

    def as_dict(self) -> dict[str, Any]:
        return {"baseline": self.names[0], "sentences": self.sentences,
                "test": f"paired bootstrap resampling, {SAMPLES} samples",
                "systems": [{"name": n, **{m: vars(r[m]) for m in METRICS}}
                            for n, r in zip(self.names, self.results)],
                "signatures": self.signatures}

    def table(self) -> str:
        """A text table: each score with its bootstrap mean and 95% interval, and the p-value
        against the baseline (``*``: significant at p < 0.05)."""
        width = max(12, *(len(n) for n in self.names))
        lines = [f"{'system':<{width}}  " + "  ".join(f"{m:<34}" for m in METRICS)]
        for n, (name, result) in enumerate(zip(self.names, self.results)):
            cells = []
            for m in METRICS:
                r = result[m]
                cell = f"{r.score:6.2f} ({r.mean:.1f} ± {r.ci:.1f})"
                if n:
                    star = "*" if r.p_value is not None and r.p_value < SIGNIFICANT else " "
                    cell += f" p={r.p_value:.4f}{star}"
                cells.append(f"{cell:<34}")
            lines.append(f"{name:<{width}}  " + "  ".join(cells))
        return "\n".join(lines)


def compare_systems(systems: Sequence[tuple[str, Sequence[str]]], references: Sequence[str],
                    lang: str | None = None) -> Comparison:
    """Score each system's detokenized translations against ``references`` and test each
    against the first with paired bootstrap resampling."""
    if len(systems) < 2:
        raise MTError("comparing needs two systems or more (the first is the baseline)")
    names = [name for name, _ in systems]
    if len(set(names)) != len(names):
        raise MTError(f"two systems have the same name ({', '.join(names)}); give each its own "
                      "file")
    for name, hyps in systems:
        if len(hyps) != len(references):
            raise MTError(f"'{name}' has {len(hyps):,} lines for {len(references):,} "
                          "references; every system must translate the same sentences")
    metrics = {"BLEU": bleu_metric(lang), "chrF2": CHRF(), "TER": TER()}
    test = PairedTest([(n, list(h)) for n, h in systems], metrics, [list(references)],
                      test_type="bs", n_samples=SAMPLES)
    signatures, scores = test()
    def plain(x: Any) -> float | None:  # sacreBLEU hands back numpy floats
        return None if x is None else float(x)

    results = [{m: MetricResult(float(r.score), plain(r.mean), plain(r.ci), plain(r.p_value))
                for m, r in ((m, scores[m][i]) for m in METRICS)}
               for i in range(len(systems))]
    return Comparison(names, results, {m: str(s) for m, s in signatures.items()},
                      len(references))
