"""Reference reports from the known lesions of each image, with varied (seeded) wording.

Every template states the same content — each lesion's class, side and diameter, or a normal
study — so wording differs between cases while findings stay checkable by the rule-based labeler
of :mod:`evaluators.report_generation`.
"""

from __future__ import annotations

import numpy as np

from tasks_lib.imaging.lesions import Lesion, LesionCase, LesionClass

_HYPER = (
    "A {d:.0f} mm hyperintense focus is seen in the {side} hemisphere.",
    "There is a {side} hemispheric hyperintensity measuring {d:.0f} mm.",
    "Small hyperintensity in the {side} cerebral hemisphere, approximately {d:.0f} mm.",
)
_MASS = (
    "A {d:.0f} mm mass with a bright rim is present in the {side} hemisphere.",
    "There is a rim-enhancing mass in the {side} hemisphere measuring {d:.0f} mm.",
    "Well-circumscribed {side} hemispheric mass, {d:.0f} mm, with a bright rim.",
)
_NORMAL = (
    "No focal mass or hyperintensity is identified.",
    "Normal appearance of the brain parenchyma without mass or hyperintensity.",
    "Unremarkable axial slice; no mass and no hyperintensity.",
)
_CLOSE = ("Impression: {n}.", "Conclusion: {n}.", "Summary: {n}.")


def sentence(lesion: Lesion, template: int) -> str:
    """One finding sentence in the chosen wording."""
    options = _HYPER if lesion.label == LesionClass.HYPERINTENSITY else _MASS
    return options[template % len(options)].format(d=lesion.diameter_mm, side=lesion.side)


def _impression(lesions: list[Lesion]) -> str:
    if not lesions:
        return "normal study"
    n_mass = sum(les.label == LesionClass.MASS for les in lesions)
    parts = []
    if n_mass:
        parts.append(f"{n_mass} mass" + ("es" if n_mass > 1 else ""))
    if len(lesions) - n_mass:
        n = len(lesions) - n_mass
        parts.append(f"{n} hyperintensit" + ("ies" if n > 1 else "y"))
    return " and ".join(parts)


def describe(lesions: list[Lesion], template: int, close: int) -> str:
    """A full report in one fixed wording (``template``/``close`` pick the templates)."""
    body = ([sentence(les, template + k) for k, les in enumerate(lesions)]
            or [_NORMAL[template % len(_NORMAL)]])
    return " ".join([*body, _CLOSE[close % len(_CLOSE)].format(n=_impression(lesions))])


def reference_report(case: LesionCase, rng: np.random.Generator) -> str:
    """The reference report of a case with randomly (seeded) chosen templates."""
    return describe(case.lesions, int(rng.integers(0, 3)), int(rng.integers(0, 3)))
