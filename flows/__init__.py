"""Thin Prefect flows that narrate steps: construct, rotate, execute, score, report."""
