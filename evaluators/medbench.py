"""MedBench v4 metrics, chosen by answer type (``../shared/specs/medbench.md`` §4)."""
