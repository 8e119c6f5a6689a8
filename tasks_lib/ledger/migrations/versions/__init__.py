"""Alembic revision scripts, one per schema change, applied in order by ``upgrade_to_head``."""
