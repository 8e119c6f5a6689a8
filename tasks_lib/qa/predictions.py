"""Recorded predictions (MedAgentsBench schema): loading and validation.

Schema: ``dataset, split, model, method, realidx, predicted_answer, prompt_tokens,
completion_tokens, time_s, cost_usd``. Duplicated ``(dataset, model, method, realidx)`` rows exist
in the published files: the first one wins everywhere in medflows.
"""

from __future__ import annotations

import pandas as pd

from tasks_lib.errors import InputDataError

COLUMNS = (
    "dataset", "split", "model", "method", "realidx", "predicted_answer",
    "prompt_tokens", "completion_tokens", "time_s", "cost_usd",
)
KEY = ["dataset", "model", "method", "realidx"]


def load_predictions(path: str, models: list[str] | None = None) -> pd.DataFrame:
    """Read a predictions CSV (optionally gzip), keep the first row per key, filter models.

    Raises:
        InputDataError: the file is missing, empty, or lacks required columns, or a listed model
            has no rows.
    """
    try:
        frame = pd.read_csv(
            path,
            dtype={"dataset": str, "split": str, "model": str, "method": str, "realidx": str,
                   "predicted_answer": str},
            keep_default_na=False,
            na_values={"prompt_tokens": [""], "completion_tokens": [""], "time_s": [""],
                       "cost_usd": [""]},
        )
    except FileNotFoundError:
        raise InputDataError(path, "predictions file not found") from None
    except pd.errors.EmptyDataError:
        raise InputDataError(path, "predictions file is empty") from None
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as exc:
        raise InputDataError(path, f"cannot parse predictions: {exc}") from None
    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise InputDataError(path, f"missing column(s): {', '.join(missing)}", line=1)
    if frame.empty:
        raise InputDataError(path, "predictions file has a header but no rows")
    if models:
        unknown = sorted(set(models) - set(frame["model"]))
        if unknown:
            raise InputDataError(
                path, f"no predictions for model(s) {', '.join(unknown)}; "
                f"models in file: {', '.join(sorted(set(frame['model'])))}"
            )
        frame = frame[frame["model"].isin(models)]
    frame = frame.drop_duplicates(subset=KEY, keep="first").reset_index(drop=True)
    for col in ("prompt_tokens", "completion_tokens", "time_s", "cost_usd"):
        frame[col] = pd.to_numeric(frame[col], errors="coerce")
    return frame
