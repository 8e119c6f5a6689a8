"""One execute for every agent that answers a pool's items (ARCHITECTURE §5 "One execute").

A kit whose agents answer items (QA replays and methods, MedBench API mode) hands the pipeline
an :class:`~tasks_lib.execution.environment.ItemEnvironment` (``kit.item_environment(pool)``):
how one chunk of items is asked and how a run's chunks become its submission, trace and run
record. Everything else is generic and lives here: planning (agent × replicate), run ids, chunk
ranges, round-robin submission, cost budgets chained across a run's chunks, progress artifacts
and the ledger row (:mod:`tasks_lib.execution.steps`). Research cells (an agent in a sandbox on
one task card) run through ``run_matrix`` instead.
"""
