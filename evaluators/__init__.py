"""Pure metric code and judges.

Nothing here imports Prefect, sqlmodel, Great Expectations or touches the network, so every
function can be pickled to a Dask worker or run inside an offline evaluator container.
Importing this package registers every built-in metric (see :mod:`evaluators.catalog`).

Layout: generic metrics (overlap, surface distance, box IoU and detection AP, image quality,
text overlap, exact match) are the top-level modules; :mod:`evaluators.graders` holds the protocol
graders, each scoring exactly as one named benchmark or challenge defines it; judges and their
rubrics are :mod:`evaluators.judges`. The one rounding rule is :mod:`evaluators.rounding`.
"""

from evaluators import catalog as catalog
