"""The one colour scale of every ratio heat map: diverging, logarithmic, from 0.5x to 2x with 1x in
the middle (so 0.8x and 1.25x are equally far from white), clipped at both ends. Red: the kernel is
slower than the baseline; blue: faster. Colours come from matplotlib's colormap."""

from __future__ import annotations

import math

RATIO_MIN, RATIO_MAX = 0.5, 2.0
CMAP = "RdBu"
TICKS = (0.5, 0.71, 1.0, 1.41, 2.0)
MISSING = "#d0d0d0"  # no ratio: not correct, or the baseline has no number


def _mpl():
    try:
        import matplotlib
        from matplotlib.colors import LogNorm
    except ImportError as e:  # an optional extra: say how to get it
        raise ImportError("the heat maps' colours need matplotlib: pip install 'kernelseek-suite[report]'") from e
    return matplotlib, LogNorm


def norm():
    """matplotlib's norm for the scale (for imshow and colorbars)."""
    _, LogNorm = _mpl()
    return LogNorm(vmin=RATIO_MIN, vmax=RATIO_MAX, clip=True)


def cmap():
    matplotlib, _ = _mpl()
    return matplotlib.colormaps[CMAP].with_extremes(bad=MISSING)


def position(ratio: float) -> float:
    """Where a ratio sits on the scale, 0 (0.5x or below) to 1 (2x or above)."""
    lo, hi = math.log(RATIO_MIN), math.log(RATIO_MAX)
    return min(1.0, max(0.0, (math.log(ratio) - lo) / (hi - lo)))


def color(ratio: float | None) -> str:
    """The cell colour of a ratio, as #rrggbb."""
    if ratio is None or not ratio > 0:
        return MISSING
    from matplotlib.colors import to_hex

    return to_hex(cmap()(position(ratio)))


def text_color(ratio: float | None) -> str:
    """Black or white, whichever reads better on the cell."""
    if ratio is None or not ratio > 0:
        return "#000000"
    from matplotlib.colors import to_rgb

    r, g, b = to_rgb(color(ratio))
    return "#ffffff" if 0.299 * r + 0.587 * g + 0.114 * b < 0.5 else "#000000"


def gradient(stops: int = 11) -> list[tuple[float, str]]:
    """(position 0..1, colour) along the scale, for a colour bar."""
    return [(i / (stops - 1), color(RATIO_MIN * (RATIO_MAX / RATIO_MIN) ** (i / (stops - 1)))) for i in range(stops)]
