"""The ledger: pools, runs and append-only score rows (sqlmodel; SQLite or PostgreSQL)."""
