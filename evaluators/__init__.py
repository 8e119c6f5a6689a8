"""Pure metric code and judges.

Nothing here imports Prefect, sqlmodel, Great Expectations or touches the network, so every
function can be pickled to a Dask worker or run inside an offline evaluator container.
Importing this package is cheap: the built-in metrics register themselves the first time the
metric registry is looked up (:data:`evaluators.metrics.METRICS` loads :mod:`evaluators.catalog`),
so the bottom layer (:mod:`evaluators.core`, :mod:`evaluators.registry`) costs the command line
nothing.

Layout: generic metrics (overlap, surface distance, box IoU and detection AP, image quality,
text overlap, exact match) are the top-level modules; :mod:`evaluators.graders` holds the protocol
graders, each scoring exactly as one named benchmark or challenge defines it; judges and their
rubrics are :mod:`evaluators.judges`. The one rounding rule is :mod:`evaluators.rounding`.
"""

from evaluators.metrics import METRICS


def _register_builtin_metrics() -> None:
    """Import every metric module (each registers itself on import)."""
    from evaluators import catalog  # noqa: F401


METRICS.load_with(_register_builtin_metrics)
