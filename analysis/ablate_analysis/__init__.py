"""ablate_analysis: read an ablate sweep file and draw replicated conclusions from it.

    import ablate_analysis as aa
    sw = aa.load("OUT.h5")          # tidy DataFrames: sw.runs, sw.steps, sw.evals, ...
    aa.report.write_report(sw, "report-dir")

See docs/analysis.md.
"""

from .load import (Sweep, SweepFileError, UnavailableRowsError,  # noqa: F401
                   UnavailableRowsWarning, load, parse_run_name)
from . import stats  # noqa: F401
