"""Every RWE study analysis, registered: import :data:`ANALYSES` from here.

The shared types and helpers live in :mod:`tasks_lib.rwe.analysis_base`; each study module
registers its reference and trap analyses when imported, and this module is the one place that
imports them all. :class:`StudyDB` is re-exported for the scripted agent's sandbox prelude.
"""

from tasks_lib.rwe import non_sepsis_analyses, sepsis_analyses  # noqa: F401  (register)
from tasks_lib.rwe.analysis_base import ANALYSES as ANALYSES
from tasks_lib.rwe.analysis_base import StudyDB as StudyDB
