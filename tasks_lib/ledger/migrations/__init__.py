"""Versioned ledger schema migrations (alembic scripts shipped inside the package)."""
