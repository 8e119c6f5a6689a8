"""The two failure classes (ARCHITECTURE §6); defined in :mod:`evaluators.core`."""

from evaluators.core import InputDataError, InvalidSubmissionError

__all__ = ["InputDataError", "InvalidSubmissionError"]
