"""`fa-fwd-sm90`: make a FlashAttention forward kernel faster than FA3 on a Hopper GPU, correct on
every scenario. The evaluator is the suite's own `kernelseek-suite eval`, run from the sealed copy of
the suite in a child process, in the sandbox (seal.py)."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from ... import config as suite_config
from ...contracts.exitcodes import BUILD, EVALUATOR, NO_GPU
from ...results import read_jsonl
from . import Evaluation, Goal, register_task

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

    def evaluate(self, kernel_path: Path, out_dir: Path, timeout_s: float, seal) -> Evaluation:
        from ..seal import collect

        t0 = time.monotonic()
        scratch = seal.new_scratch()
        try:
            kernel = scratch / "work" / Path(self.kernel).name
            kernel.parent.mkdir()
            (scratch / "out").mkdir()
            shutil.copyfile(kernel_path, kernel)
            ran = seal.run(
                seal.command("kernelseek_suite.cli", self.arguments(kernel, scratch / "out")), scratch, timeout_s
            )
            collect(scratch / "out", out_dir)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        wall = time.monotonic() - t0
        if ran.timed_out:
            return Evaluation(
                "timeout",
                False,
                self.baseline,
                error=f"the evaluator took longer than {timeout_s:.0f}s",
                wall_s=wall,
                out_dir=str(out_dir),
            )
        return parse_eval_output(ran.returncode, ran.stdout, ran.stderr, self.baseline, out_dir, wall)


def _last_json(stdout: str) -> dict | None:
    for line in reversed(stdout.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                return None
    return None


def parse_eval_output(rc: int, stdout: str, stderr: str, baseline: str, out_dir: Path, wall_s: float) -> Evaluation:
    """An Evaluation from `kernelseek-suite eval --json`: exit 0 all correct, 1 not, 2 build failure,
    3 no suitable GPU, 4 usage, 6 the evaluator's own failure (its worker could not use the GPU);
    stdout's last line is summary.json (or the build failure). Anything but a verdict (3, 6, another
    code, no summary) is the evaluator's failure: `no_gpu` or `error`, which end the run."""
    data = _last_json(stdout)
    tail = stderr.strip()[-3000:]
    if rc == EVALUATOR:
        why = (data or {}).get("evaluator_error") or tail or "the evaluator's machinery failed"
        return Evaluation("error", False, baseline, error=why, wall_s=wall_s, out_dir=str(out_dir))
    if rc == BUILD:
        err = (data or {}).get("error") or tail
        return Evaluation("build_failed", False, baseline, error=err, wall_s=wall_s, out_dir=str(out_dir))
    if rc == NO_GPU:
        return Evaluation(
            "no_gpu", False, baseline, error=tail or "no suitable GPU", wall_s=wall_s, out_dir=str(out_dir)
        )
    if rc not in (0, 1) or not data or "scenarios_total" not in data:
        return Evaluation(
            "error",
            False,
            baseline,
            error=f"the evaluator exited with {rc}: {tail}",
            wall_s=wall_s,
            out_dir=str(out_dir),
        )
    rows = read_jsonl(out_dir / "bench.jsonl")
    per = []
    for r in rows:
        if r.status != "ok" or r.ratio.get(baseline) is not None:
            per.append(
                {
                    "scenario": r.scenario,
                    "status": r.status,
                    "ratio": r.ratio.get(baseline),
                    "reason": (r.reason or "")[:200],
                }
            )
    ok = rc == 0
    return Evaluation(
        "ok" if ok else "wrong",
        ok,
        baseline,
        scenarios_total=data["scenarios_total"],
        scenarios_correct=data["scenarios_correct"],
        extended_total=data.get("extended_total", 0),
        extended_correct=data.get("extended_correct", 0),
        geomean=(data.get("geomean") or {}).get(baseline),
        min_ratio=(data.get("min_ratio") or {}).get(baseline),
        min_ratio_scenario=(data.get("min_ratio_scenario") or {}).get(baseline),
        per_scenario=per,
        wall_s=wall_s,
        out_dir=str(out_dir),
    )
