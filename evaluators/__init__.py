"""Pure metric code and judges.

Nothing here imports Prefect, sqlmodel, Great Expectations or touches the network, so every
function can be pickled to a Dask worker or run inside an offline evaluator container.
Importing this package registers every built-in metric (see :mod:`evaluators.catalog`).
"""

from evaluators import catalog as catalog
