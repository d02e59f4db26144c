"""The pass rule: FlashAttention's own, max|out - ref| <= factor * max|out_lowp - ref| + atol, every
element written and finite; LSE checked when produced (rows with nothing to attend must be -inf).
A reference that is not finite fails every output (no NaN comparison lets a wrong answer through)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from ..config import CheckConfig


@dataclass
class CheckResult:
    ok: bool
    reason: str
    max_err: float
    lowp_err: float
    tol: float
    nonfinite: int
    lse_err: float | None = None
    code: str = ""  # "", "nonfinite", "mismatch" or "lse" (see results.CODES)

    def to_dict(self) -> dict:
        return asdict(self)


def check_output(out, ref, lowp, lse=None, ref_lse=None, cfg: CheckConfig = CheckConfig()) -> CheckResult:
    import torch

    if out.shape != ref.shape:
        return CheckResult(
            False,
            f"output shape {tuple(out.shape)} != {tuple(ref.shape)}",
            float("inf"),
            0.0,
            0.0,
            out.numel(),
            code="mismatch",
        )
    outf = out.float()
    finite = torch.isfinite(outf)
    nonfinite = int((~finite).sum().item())
    lowp_err = float((lowp.float() - ref).abs().max().item()) if ref.numel() else 0.0
    tol = cfg.factor * lowp_err + cfg.atol
    if nonfinite:
        return CheckResult(
            False,
            f"{nonfinite} of {out.numel()} output elements are NaN/Inf (unwritten or non-finite)",
            float("nan"),
            lowp_err,
            tol,
            nonfinite,
            code="nonfinite",
        )
    if not math.isfinite(tol):
        return CheckResult(
            False,
            "the reference or its bf16 twin is not finite (a harness fault)",
            float("nan"),
            lowp_err,
            tol,
            0,
            code="mismatch",
        )
    max_err = float((outf - ref).abs().max().item()) if ref.numel() else 0.0
    if not max_err <= tol:
        return CheckResult(
            False,
            f"max error {max_err:.3g} > tolerance {tol:.3g} "
            f"({cfg.factor:g} x bf16-reference error {lowp_err:.3g} + {cfg.atol:g})",
            max_err,
            lowp_err,
            tol,
            0,
            code="mismatch",
        )
    lse_err = None
    if lse is not None and ref_lse is not None:
        empty = torch.isneginf(ref_lse)
        if bool((torch.isnan(lse)).any()):
            return CheckResult(False, "LSE has NaN", max_err, lowp_err, tol, 0, code="lse")
        if bool((~torch.isneginf(lse[empty])).any()):
            return CheckResult(
                False, "LSE of rows with nothing to attend is not -inf", max_err, lowp_err, tol, 0, code="lse"
            )
        live = ~empty
        if bool(live.any()):
            if bool((~torch.isfinite(lse[live])).any()):
                return CheckResult(
                    False, "LSE is not finite on rows that attend", max_err, lowp_err, tol, 0, code="lse"
                )
            if bool((~torch.isfinite(ref_lse[live])).any()):
                return CheckResult(
                    False,
                    "the reference LSE is not finite on rows that attend (a harness fault)",
                    max_err,
                    lowp_err,
                    tol,
                    0,
                    code="lse",
                )
            diff = (lse[live] - ref_lse[live]).abs()
            bound = cfg.lse_atol + cfg.lse_rtol * ref_lse[live].abs()
            lse_err = float(diff.max().item())
            if bool((diff > bound).any()):
                return CheckResult(
                    False,
                    f"LSE error {lse_err:.3g} > {cfg.lse_atol:g} + {cfg.lse_rtol:g}|lse|",
                    max_err,
                    lowp_err,
                    tol,
                    0,
                    lse_err,
                    code="lse",
                )
        else:
            lse_err = 0.0
    return CheckResult(True, "", max_err, lowp_err, tol, 0, lse_err)
