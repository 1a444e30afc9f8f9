"""setuptools hook of `pip install ./analysis` (pyproject.toml has the project): page.html
is package data (pyproject.toml), and uPlot, which the page embeds, is copied into the
package when it is found where scripts/install-deps.sh puts it ($ABLATE_UPLOT, else the
checkout's data/uplot), so that the installed ablate-report writes report.html without the
checkout. ablate_analysis.page checks the files' SHA-256 before embedding them."""
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
UPLOT_FILES = ("uPlot.iife.min.js", "uPlot.min.css", "LICENSE")


class BuildPy(build_py):
    def run(self):
        super().run()
        src = os.environ.get("ABLATE_UPLOT") or os.path.join(HERE, "..", "data", "uplot")
        dst = os.path.join(self.build_lib, "ablate_analysis", "uplot")
        if all(os.path.isfile(os.path.join(src, f)) for f in UPLOT_FILES[:2]):
            os.makedirs(dst, exist_ok=True)
            for f in UPLOT_FILES:
                if os.path.isfile(os.path.join(src, f)):
                    shutil.copy(os.path.join(src, f), os.path.join(dst, f))
        else:  # the package works without it; report.html then says how to get uPlot
            print("ablate-analysis: uPlot not found in %s: the installed ablate-report will "
                  "need ABLATE_UPLOT to write report.html" % src)


setup(cmdclass={"build_py": BuildPy})
