"""The report of one architecture's results folder (`results/<arch>/`): REPORT.md, plots, CSV and
LaTeX tables, all rendered from the raw data beside them, and REPORT.html, the same as one
self-contained page; `verify`, which compares a fresh run with the shipped one scenario by scenario;
and the viewer of agent run traces (trace_html.py, imported on its own: it reads traces)."""

from .data import ArchResults, load
from .document import render
from .html import render_html
from .verify import Verdict, compare

__all__ = ["ArchResults", "load", "render", "render_html", "Verdict", "compare"]
