"""``medflows medbench download`` / ``upload``: MedBench v4's answer-upload mode (references never
leave the server; every upload is version-locked and append-only)."""
