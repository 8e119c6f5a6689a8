"""Replay capsules: one archive that carries runs (or a pool) off the machine that made them,
so someone else re-scores them offline and re-executes their model calls from the call cache.

- :mod:`tasks_lib.capsule.archive` — the format: ``capsule.json`` (format version, what the
  capsule holds, every member with its size and sha256) and the tar/zip reader that checks every
  hash before anything is written;
- :mod:`tasks_lib.capsule.export` — what a run, a pool version or a report puts in a capsule;
- :mod:`tasks_lib.capsule.restore` — import into the configured storage root and ledger.

The user's guide: ``docs/capsules.md``.
"""
