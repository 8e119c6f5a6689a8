"""Where the reference data is for tests (the same place the settings point at)."""

from __future__ import annotations

import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DATA_ROOT = Path(os.environ.get("MEDFLOWS_DATA_ROOT", PROJECT_ROOT.parent / "shared" / "data"))
QA_SOURCE = DATA_ROOT / "medagentsbench"
