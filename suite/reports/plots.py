"""The report's plots (matplotlib, PNG): the ratio to a baseline as a heat map over head
configuration x sequence length, causal and not, every one on the same diverging log scale
(scale.py: 0.5x to 2x, 1x white); TFLOP/s against sequence length per head configuration, the
kernel (named by its file) beside its baselines, with the measured GEMM reference drawn in and
labelled with its value.

Files (names stable): `ratio_vs_<baseline>_<mask>.png` (each row's ratio: its lowest over the input
distributions where there are several), `ratio_vs_<baseline>_<mask>_<distribution>.png` (one input
distribution's, for a run timed on several) and `tflops_vs_seqlen_<mask>.png`."""

from __future__ import annotations

import math
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from .. import report
from ..scenarios import HEAD_CONFIGS, SEQLENS
from . import scale
from .data import ArchResults
from .tables import LOWEST, view_ratio


def _pyplot():
    try:
        import matplotlib
    except ImportError as e:  # an optional extra: say how to get it
        raise ImportError("plots need matplotlib: pip install 'kernelseek-suite[report]'") from e
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _mask_name(causal: bool) -> str:
    return "causal" if causal else "non-causal"


def heatmap_name(baseline: str, mask: str, distribution: str | None = None) -> str:
    """A heat map's key in render_all's answer."""
    return f"ratio vs {baseline}, {mask}" + (f", on {distribution}" if distribution else "")


def heatmap_file(baseline: str, mask: str, distribution: str | None = None) -> str:
    return f"ratio_vs_{baseline}_{mask}" + (f"_{distribution}" if distribution else "") + ".png"


def heatmap(res: ArchResults, baseline: str, causal: bool, path: Path, distribution: str | None = None) -> Path | None:
    """None when no scenario of that mask has a ratio to `baseline`. Every map is on the one scale of
    scale.py (log, 0.5x-2x), as are REPORT.html's. The ratios are each row's (`ratio`), or those of
    one input `distribution`."""
    plt = _pyplot()
    view = distribution or LOWEST
    cell = {(r.head_config, r.seqlen_q): r for r in res.grid_rows if r.causal == causal}
    hcs = [hc.name for hc in HEAD_CONFIGS if any(k[0] == hc.name for k in cell)]
    grid = [
        [
            (view_ratio(res, cell[(h, s)], baseline, view) if (h, s) in cell and cell[(h, s)].correct else None)
            for s in SEQLENS
        ]
        for h in hcs
    ]
    values = [v for row in grid for v in row if v]
    if not values:
        return None
    fig, ax = plt.subplots(figsize=(8.5, 0.45 * len(hcs) + 1.8))
    data = [[math.nan if v is None else v for v in row] for row in grid]
    im = ax.imshow(data, cmap=scale.cmap(), norm=scale.norm(), aspect="auto")
    flagged = report.data_dependent_rows(res.summary)
    for i, row in enumerate(grid):
        for j, v in enumerate(row):
            r = cell.get((hcs[i], SEQLENS[j]))
            text = f"{v:.2f}" if v is not None else ("" if r is None else ("n/a" if r.correct else r.status))
            if r is not None and r.scenario in flagged:
                text += "*"
            ax.text(j, i, text, ha="center", va="center", fontsize=8, color=scale.text_color(v))
    ax.set_xticks(range(len(SEQLENS)), [str(s) for s in SEQLENS])
    ax.set_yticks(range(len(hcs)), hcs)
    marked = any(r.scenario in flagged for r in cell.values())
    ax.set_xlabel(
        "sequence length (batch x seqlen = 32768 tokens)" + (f"; *: {report.DATA_DEPENDENT}" if marked else "")
    )
    gpu = res.provenance.get("gpu_name") or "GPU"
    kernel = res.kernel_file
    if distribution:
        inputs = f"on {distribution} inputs"
    else:
        inputs = "each row's lowest over the inputs" if report.distributions(res.summary) else ""
    ax.set_title(
        f"{baseline} time / {kernel} time, {_mask_name(causal)}{', ' + inputs if inputs else ''} ({gpu}); "
        f"> 1: {kernel} faster",
        fontsize=10,
    )
    bar = fig.colorbar(im, ax=ax, shrink=0.8, extend="both")
    bar.set_ticks(scale.TICKS, labels=[f"{t:g}x" for t in scale.TICKS])
    bar.minorticks_off()
    bar.set_label(f"{baseline} time / {kernel} time (log scale, the same on every map)", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def tflops_vs_seqlen(res: ArchResults, causal: bool, path: Path) -> Path | None:
    plt = _pyplot()
    rows = [r for r in res.grid_rows if r.causal == causal and r.tflops]
    if not rows:
        return None
    hcs = [hc.name for hc in HEAD_CONFIGS if any(r.head_config == hc.name for r in rows)]
    impls = ["kernel"] + [b for b in res.baselines if any(r.tflops.get(b) for r in rows)]
    label = {"kernel": res.kernel_file}
    ncol = 4
    nrow = math.ceil(len(hcs) / ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(4 * ncol, 2.9 * nrow), squeeze=False)
    ceiling = res.ceiling_tflops
    for ax, hc in zip(axes.flat, hcs):
        mine = sorted((r for r in rows if r.head_config == hc), key=lambda r: r.seqlen_q)
        for impl in impls:
            pts = [(r.seqlen_q, r.tflops[impl]) for r in mine if r.tflops.get(impl) and (impl != "kernel" or r.correct)]
            if pts:
                ax.plot(
                    *zip(*pts),
                    marker="o",
                    markersize=3,
                    label=label.get(impl, impl),
                    linewidth=2.2 if impl == "kernel" else 1.2,
                )
        if ceiling:
            ax.axhline(
                ceiling,
                color="grey",
                linestyle="--",
                linewidth=0.8,
                label=f"bf16 GEMM reference (measured), {ceiling:.0f} TFLOP/s",
            )
        ax.set_xscale("log", base=2)
        ax.set_xticks(SEQLENS, [f"{s // 1024}k" if s >= 1024 else str(s) for s in SEQLENS], fontsize=8)
        ax.minorticks_off()
        ax.set_title(hc, fontsize=9)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
    for ax in list(axes.flat)[len(hcs) :]:
        ax.set_visible(False)
    for ax in axes[:, 0]:
        ax.set_ylabel("TFLOP/s")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower right", ncol=len(labels))
    fig.suptitle(f"TFLOP/s vs sequence length, {_mask_name(causal)} ({res.provenance.get('gpu_name') or 'GPU'})")
    fig.tight_layout(rect=(0, 0.03, 1, 0.97))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def available() -> bool:
    try:
        import matplotlib  # noqa: F401

        return True
    except ImportError:
        return False


Task = tuple[str, ArchResults, str | None, bool, Path, str | None]


def _draw(task: Task) -> Path | None:
    kind, res, baseline, causal, path, distribution = task
    if kind == "heatmap":
        assert baseline is not None
        return heatmap(res, baseline, causal, path, distribution)
    return tflops_vs_seqlen(res, causal, path)


def render_all(res: ArchResults, folder: Path, processes: int | None = None) -> dict[str, Path]:
    """Every plot there is data for, keyed by a short name; old PNGs in `folder` are removed first
    so nothing stale is left beside a fresh report. The plots are independent and each takes most
    of a second to lay out and draw: they are drawn in up to `processes` processes at once (default:
    one per core, at most one per plot; 1: in this process)."""
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.png"):
        old.unlink()
    tasks: list[tuple[str, Task]] = []
    for causal in (False, True):
        m = _mask_name(causal)
        for b in res.baselines:
            for d in [None, *report.distributions(res.summary)]:
                tasks.append((heatmap_name(b, m, d), ("heatmap", res, b, causal, folder / heatmap_file(b, m, d), d)))
        tasks.append(
            (f"TFLOP/s vs seqlen, {m}", ("tflops", res, None, causal, folder / f"tflops_vs_seqlen_{m}.png", None))
        )
    n = min(len(tasks), processes or os.cpu_count() or 1)
    if n <= 1:
        paths = [_draw(t) for _, t in tasks]
    else:  # spawned, not forked: the caller may have threads running
        with ProcessPoolExecutor(n, mp_context=multiprocessing.get_context("spawn")) as pool:
            paths = list(pool.map(_draw, [t for _, t in tasks]))
    return {name: p for (name, _), p in zip(tasks, paths) if p}
