"""The report of one architecture's results folder (`results/<arch>/`): REPORT.md, plots, CSV and
LaTeX tables, all rendered from the raw data beside them; and `verify`, which compares a fresh run
with the shipped one scenario by scenario."""

from .data import ArchResults, load
from .document import render
from .verify import Verdict, compare

__all__ = ["ArchResults", "load", "render", "Verdict", "compare"]
