"""Report generation: lexical overlap (BLEU, METEOR, ROUGE-L) plus finding-label agreement.

Per case the score is the unweighted mean of four components:

* **BLEU** — the mean of BLEU-1..4 (nltk ``sentence_bleu``, uniform n-gram weights per order,
  Chen & Cherry smoothing method 1, one reference).
* **METEOR** — nltk's ``meteor_score`` (α = 0.9, β = 3, γ = 0.5) with exact and Porter-stem
  matching only. *Deviation*: WordNet synonym matching is disabled because the WordNet corpus
  cannot be downloaded here; a null synonym source is passed to nltk, so scores equal nltk's on
  any pair without synonym-only matches. Whitespace is collapsed before tokenising.
* **ROUGE-L** — F-measure of ``rouge_score.RougeScorer(["rougeL"], use_stemmer=True)``.
* **finding F1** — F1 over the positive finding labels found by :func:`label_findings` in the
  prediction vs the reference (both without findings → P = R = F1 = 1; one empty → 0).

Tokens are lower-cased ``\\w+`` runs. The task score is the mean of per-case scores; precision,
recall and F1 over finding labels are also reported micro-averaged over all cases. An empty or
missing report scores 0 on every component.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from evaluators.metrics import Direction, metric

FINDINGS: dict[str, tuple[str, ...]] = {
    "nodule": ("nodule", "nodules", "nodular"),
    "mass": ("mass", "masses", "space-occupying"),
    "calcification": ("calcification", "calcifications", "calcified"),
    "effusion": ("effusion", "effusions", "fluid collection"),
    "atrophy": ("atrophy", "atrophic", "volume loss"),
    "hyperintensity": ("hyperintensity", "hyperintensities", "hyperintense"),
    "enlargement": ("enlargement", "enlarged", "dilated", "dilatation"),
}
"""Finding label → trigger phrases (matched on word boundaries, case-insensitive)."""

NEGATIONS = ("no", "without", "absent", "negative for", "free of", "not", "nor")
"""A trigger preceded within the same clause by one of these is a negative mention."""

_CLAUSE = re.compile(r"[.;:\n]|,\s*but\b|\bbut\b")
_TOKEN = re.compile(r"\w+")


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens (whitespace collapsed)."""
    return _TOKEN.findall(" ".join(text.split()).lower())


def label_findings(text: str) -> frozenset[str]:
    """Positive finding labels mentioned in a report (rule-based, clause-level negation)."""
    found: set[str] = set()
    for clause in _CLAUSE.split(text.lower()):
        for label, triggers in FINDINGS.items():
            for trig in triggers:
                m = re.search(rf"\b{re.escape(trig)}\b", clause)
                if m is None:
                    continue
                before = clause[: m.start()]
                if not any(re.search(rf"\b{re.escape(n)}\b", before) for n in NEGATIONS):
                    found.add(label)
    return frozenset(found)


class PRF(NamedTuple):
    """Precision, recall and F1 (plus the counts they came from)."""

    precision: float
    recall: float
    f1: float
    tp: int
    fp: int
    fn: int


def prf(pred: frozenset[str], ref: frozenset[str]) -> PRF:
    """Set precision/recall/F1; both empty → all 1."""
    tp, fp, fn = len(pred & ref), len(pred - ref), len(ref - pred)
    return prf_counts(tp, fp, fn)


def prf_counts(tp: int, fp: int, fn: int) -> PRF:
    """Precision/recall/F1 from counts; no positives anywhere → all 1."""
    if tp + fp + fn == 0:
        return PRF(1.0, 1.0, 1.0, 0, 0, 0)
    p = tp / (tp + fp) if tp + fp else 0.0
    r = tp / (tp + fn) if tp + fn else 0.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    return PRF(p, r, f, tp, fp, fn)


@metric("bleu", direction=Direction.HIGHER, averaging="per case, mean over cases",
        description="mean of BLEU-1..4 (nltk, smoothing method 1)", missing=0.0)
def bleu(prediction: str | None, reference: str) -> float:
    """Mean of sentence BLEU-1, -2, -3 and -4 against one reference."""
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

    hyp, ref = tokenize(prediction or ""), tokenize(reference)
    if not hyp or not ref:
        return 0.0
    smooth = SmoothingFunction().method1
    weights = [(1.0,), (0.5, 0.5), (1 / 3, 1 / 3, 1 / 3), (0.25, 0.25, 0.25, 0.25)]
    return float(sum(sentence_bleu([ref], hyp, weights=w, smoothing_function=smooth)
                     for w in weights) / 4.0)


class _NoSynonyms:
    """A WordNet stand-in with no synsets: METEOR falls back to exact + stem matching."""

    def synsets(self, _word: str) -> list[object]:
        return []


@metric("meteor", direction=Direction.HIGHER, averaging="per case, mean over cases",
        description="METEOR, exact + Porter-stem stages (no WordNet synonyms)", missing=0.0)
def meteor(prediction: str | None, reference: str) -> float:
    """nltk METEOR with a null synonym source (see the module docstring)."""
    from nltk.translate.meteor_score import meteor_score

    hyp, ref = tokenize(prediction or ""), tokenize(reference)
    if not hyp or not ref:
        return 0.0
    return float(meteor_score([ref], hyp, wordnet=_NoSynonyms()))


@metric("rouge_l", direction=Direction.HIGHER, averaging="per case, mean over cases",
        description="ROUGE-L F-measure (rouge-score, Porter stemmer)", missing=0.0)
def rouge_l(prediction: str | None, reference: str) -> float:
    """ROUGE-L F-measure of ``rouge_score``."""
    from rouge_score import rouge_scorer

    if not (prediction or "").strip() or not reference.strip():
        return 0.0
    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)
    return float(scorer.score(reference, prediction or "")["rougeL"].fmeasure)


@metric("finding_f1", direction=Direction.HIGHER,
        averaging="per case, mean over cases (micro P/R/F1 over all cases also reported)",
        description="F1 over positive finding labels of a rule-based labeler", missing=0.0,
        both_empty=1.0, one_empty=0.0)
def finding_f1(prediction: str | None, reference: str) -> float:
    """F1 between the finding labels of prediction and reference."""
    if not (prediction or "").strip():
        return 0.0
    return prf(label_findings(prediction or ""), label_findings(reference)).f1


@metric("report_score", direction=Direction.HIGHER, averaging="per case, mean over cases",
        description="unweighted mean of BLEU, METEOR, ROUGE-L and finding F1", missing=0.0)
def report_score(prediction: str | None, reference: str) -> float:
    """The per-case report score: mean of the four components."""
    parts = (bleu(prediction, reference), meteor(prediction, reference),
             rouge_l(prediction, reference), finding_f1(prediction, reference))
    return float(sum(parts) / 4.0)
