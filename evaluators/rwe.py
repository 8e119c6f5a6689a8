"""RWE-bench metrics: RAR, SMR, ACC, SR, CR and the gate logic (``../shared/specs/rwe.md`` §5)."""
