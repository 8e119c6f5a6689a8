"""``medflows pool build medbench`` and ``medflows medbench calibrate``: the MedBench v4 item bank
and the judge's human calibration (commands register on :data:`flows.cli.groups.medbench_app`)."""
