"""`fa-fwd-sm90`: make a FlashAttention forward kernel faster than FA3 on a Hopper GPU, correct on
every scenario. The evaluator is the suite's own `kernelseek-suite eval`, run from the sealed copy of
the suite in a child process, in the sandbox (seal.py); the full grid is its `kernelseek-suite bench`
over all 182 scenarios, run the same way. Both are read by contracts/evaljson.py."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from ... import config as suite_config
from ... import gpu
from ...contracts.evaljson import last_json, read_outcome
from ...results import read_jsonl
from ..seal import Ran, collect
from . import Evaluation, Goal, GridResult, register_task

DESCRIPTION = """\
Task: make a FlashAttention forward kernel for NVIDIA {gpus} ({arch}) as fast as possible while it \
stays correct on every scenario.
The kernel is one CUDA file that follows the suite's kernel contract: it uses only the CUDA \
runtime/driver API and inline PTX (no CUTLASS, CuTe, cuBLAS, cuDNN, CUB, Thrust or WMMA, no local \
includes), declares the `ks_attn_params` struct itself and exports `ks_abi_version`, \
`ks_params_size` and `ks_attn_fwd(const ks_attn_params*, cudaStream_t)`. Keep those exactly as \
they are in the starting file. q, k, v and out are bf16, laid out (batch, seqlen, heads, headdim); \
the LSE is fp32; GQA maps q head h to kv head h / (heads_q / heads_kv); the causal mask is aligned \
bottom-right.
The evaluator builds the file with nvcc for {arch}, checks it against an fp32 reference on 182 \
scenarios (head dims 64 to 256, sequence lengths 512 to 32768, causal or not, MHA/GQA/MQA) and an \
extended set of odd shapes, then times a representative subset against {baseline}. ptxas warnings \
about serialized wgmma, injected warpgroup arrives or register overflow fail the build."""


@register_task("fa-fwd-sm90")
class FlashAttentionForward:
    name = "fa-fwd-sm90"

    def __init__(
        self,
        kernel: str | None = None,
        goal: float = 1.0,
        arch: str = "sm90",
        baseline: str | None = None,
        extended: bool = True,
    ):
        self.start = Path(kernel) if kernel else suite_config.REPO_ROOT / "kernels" / "reference" / "attn_fwd_ref.cu"
        self.start = self.start.resolve()
        if not self.start.is_file():
            raise FileNotFoundError(f"starting kernel {self.start} not found")
        self.arch = arch
        self.kernel = self.start.name
        self.baseline = baseline or suite_config.ARCHES[arch]["baseline"]
        self.goal = Goal(float(goal), self.baseline)
        self.extended = extended

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "kernel": self.kernel,
            "start": str(self.start),
            "arch": self.arch,
            "baseline": self.baseline,
            "extended": self.extended,
            "goal": self.goal.to_dict(),
        }

    def description(self) -> str:
        return DESCRIPTION.format(gpus=suite_config.ARCHES[self.arch]["gpus"], arch=self.arch, baseline=self.baseline)

    def setup(self, ws) -> None:
        shutil.copyfile(self.start, ws.root / self.kernel)

    def seal(self, dest: Path) -> None:
        """Nothing beyond the suite's code: the evaluator compiles the candidate each time (in its
        scratch folder, with a build cache of its own), and its reference is the suite's."""
        dest.mkdir(parents=True, exist_ok=True)

    def arguments(self, kernel_path: Path, out_dir: Path) -> list[str]:
        """`kernelseek-suite eval`'s arguments."""
        args = [
            "eval",
            str(kernel_path),
            "--arch",
            self.arch,
            "--json",
            "--out",
            str(out_dir),
            "--baseline",
            self.baseline,
        ]
        return args + ([] if self.extended else ["--no-extended"])

    def bench_arguments(self, kernel_path: Path, out_dir: Path) -> list[str]:
        """`kernelseek-suite bench`'s arguments: every scenario of the grid against the baseline."""
        args = ["bench", "--arch", self.arch, "--kernel", str(kernel_path), "--baseline", self.baseline]
        return args + ["--out", str(out_dir)]

    def evaluate(self, kernel_path: Path, out_dir: Path, timeout_s: float, seal) -> Evaluation:
        t0 = time.monotonic()
        ran = self._run_sealed(self.arguments, kernel_path, out_dir, timeout_s, seal)
        wall = time.monotonic() - t0
        return parse_eval_output(ran.returncode, ran.stdout, ran.stderr, self.baseline, out_dir, wall, timeout_s)

    def full_grid_unavailable(self) -> GridResult | None:
        try:
            gpu.require_gpu(self.arch, gpu.default_gpu_index())
        except gpu.NoGPUError as e:
            return GridResult(
                "no_gpu",
                baseline=self.baseline,
                note=f"skipped: {e}. Bench the best kernels where there is one: kernelseek-suite compare "
                "--from-traces DIR --final-bench",
            )
        return None

    def bench_full_grid(self, kernel_path: Path, out_dir: Path, timeout_s: float, seal) -> GridResult:
        ran = self._run_sealed(self.bench_arguments, kernel_path, out_dir, timeout_s, seal)
        summary = _read_json(out_dir / "summary.json")
        got = read_outcome(ran.returncode, summary, ran.stderr, timeout_s, program="the bench", tail_chars=500)
        if got.summary is None:
            return GridResult(got.status, baseline=self.baseline, note=got.error or "")
        ok = got.status == "ok"
        return GridResult(
            got.status,
            (got.summary.get("geomean") or {}).get(self.baseline),
            got.summary.get("scenarios_correct"),
            got.summary.get("scenarios_total"),
            self.baseline,
            "" if ok else "not correct on every scenario of the grid",
        )

    def _run_sealed(self, arguments: Callable[[Path, Path], list[str]], kernel_path, out_dir, timeout_s, seal) -> Ran:
        """`kernelseek-suite` of the sealed copy (`arguments(kernel, out)`) on a copy of the kernel, in a
        scratch folder of its own; what it wrote is collected into `out_dir`."""
        scratch = seal.new_scratch()
        try:
            kernel = scratch / "work" / Path(self.kernel).name
            kernel.parent.mkdir()
            (scratch / "out").mkdir()
            shutil.copyfile(kernel_path, kernel)
            command = seal.command("kernelseek_suite.cli", arguments(kernel, scratch / "out"))
            ran = seal.run(command, scratch, timeout_s)
            collect(scratch / "out", out_dir)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        return ran


def _baseline_unavailable(out_dir: Path, baseline: str, rows: list) -> str | None:
    """Why the evaluator could not run `baseline`: its import failed (provenance.json's
    `baseline_status`), or it ran on no timed scenario (each row's column for it, the first one's
    words); None where it ran or nothing says."""
    status = ((_read_json(out_dir / "provenance.json") or {}).get("baseline_status") or {}).get(baseline)
    if status not in (None, "ok"):
        return str(status)[:500]
    said = [r.baselines[baseline] for r in rows if baseline in (r.baselines or {})]
    if said and not any(str(s).startswith("ok") for s in said):
        return f"on every scenario: {str(said[0])[:500]}"
    return None


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def parse_eval_output(
    rc: int | None, stdout: str, stderr: str, baseline: str, out_dir: Path, wall_s: float, timeout_s: float = 0.0
) -> Evaluation:
    """An Evaluation from `kernelseek-suite eval --json` (contracts/evaljson.py; `rc` None: killed at
    `timeout_s`): exit 0 all correct, 1 not, 2 build failure, 3 no suitable GPU, 6 the evaluator's own
    failure (its worker could not use the GPU); stdout's last line is summary.json (or the build
    failure). Anything but a verdict (a time-out, 3, 6, another code, no summary) is the evaluator's
    failure: `timeout`, `no_gpu` or `error`, which end the run."""
    got = read_outcome(rc, last_json(stdout), stderr, timeout_s)
    data = got.summary
    if data is None:
        return Evaluation(got.status, False, baseline, error=got.error, wall_s=wall_s, out_dir=str(out_dir))
    rows = read_jsonl(out_dir / "bench.jsonl")
    per = [
        {"scenario": r.scenario, "status": r.status, "ratio": r.ratio.get(baseline), "reason": (r.reason or "")[:200]}
        for r in rows
        if r.status != "ok" or r.ratio.get(baseline) is not None
    ]
    counts = {
        "scenarios_total": data["scenarios_total"],
        "scenarios_correct": data["scenarios_correct"],
        "extended_total": data.get("extended_total", 0),
        "extended_correct": data.get("extended_correct", 0),
    }
    timed = (data.get("geomean") or {}).get(baseline) is not None
    unavailable = None if timed else _baseline_unavailable(out_dir, baseline, rows)
    if unavailable:
        # the goal's baseline could not run in the evaluator: no speed can be measured whatever the
        # kernel, the evaluator's failure (it ends the run), not a verdict on the kernel
        why = f"the evaluator could not run the baseline {baseline} ({unavailable}), so no speed can be measured"
        return Evaluation(
            "error",
            False,
            baseline,
            **counts,
            error=f"{why} whatever the kernel (not the kernel's fault)",
            wall_s=wall_s,
            out_dir=str(out_dir),
        )
    return Evaluation(
        got.status,
        got.status == "ok",
        baseline,
        **counts,
        geomean=(data.get("geomean") or {}).get(baseline),
        min_ratio=(data.get("min_ratio") or {}).get(baseline),
        min_ratio_scenario=(data.get("min_ratio_scenario") or {}).get(baseline),
        per_scenario=per,
        wall_s=wall_s,
        out_dir=str(out_dir),
    )
