"""The one rounding rule of medflows, stated once: half away from zero, on the decimal value.

Python's :func:`round` rounds half to even and works on the binary approximation of a float
(``round(2.675, 2) == 2.67``); reports, leaderboards and judge labels instead round **half up**
(away from zero) the number *as written*: ``81.25 → 81.3``, ``2.675 → 2.68``, ``−0.25 → −0.3``.
"""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction


def round_half_up(value: float | Fraction, digits: int = 1) -> float:
    """Round half away from zero to ``digits`` decimals (``81.25 → 81.3``, ``-0.25 → -0.3``).

    A float is read as its shortest decimal representation (``2.675`` is rounded as written,
    not as its binary approximation); a :class:`~fractions.Fraction` is rounded exactly.
    """
    exact = value if isinstance(value, Fraction) else Fraction(Decimal(repr(float(value))))
    scaled = abs(exact) * 10**digits
    rounded = math.floor(scaled + Fraction(1, 2))
    sign = -1 if exact < 0 else 1
    return float(Fraction(sign * rounded, 10**digits))
