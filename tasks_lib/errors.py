"""The two failure classes (ARCHITECTURE §6); defined in :mod:`evaluators.vocabulary` (as
:mod:`evaluators.core` exports them), which imports no library."""

from evaluators.vocabulary import InputDataError, InvalidSubmissionError

__all__ = ["InputDataError", "InvalidSubmissionError"]
