"""What the head-to-head's plots share: matplotlib without a display, and the axes' labels, grid and
legend. matplotlib is imported only when a plot is made."""

from __future__ import annotations

from dataclasses import dataclass


def pyplot():
    """matplotlib.pyplot, on the Agg backend (files only, no display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


@dataclass(frozen=True)
class Frame:
    """The axes' labels and title, and the legend's font size and place."""

    xlabel: str
    ylabel: str
    title: str
    legend_size: int
    legend_loc: str


def finish(fig, ax, frame: Frame) -> None:
    """Labels, a light grid and a legend (where anything is labelled), laid out tightly."""
    ax.set_xlabel(frame.xlabel)
    ax.set_ylabel(frame.ylabel)
    ax.set_title(frame.title)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=frame.legend_size, loc=frame.legend_loc)
    fig.tight_layout()
