"""RWE-bench track: synthetic EHR, study database, gated questions, cohort screening."""
