"""MedBench v4 track: item bank, judges, calibration, submission modes and the HTTP service."""
