"""``medflows serve``: the MedBench v4 HTTP service (FastAPI + uvicorn, 127.0.0.1 by default)."""
