"""The tool-rich arm's views into a CUDA candidate: `profile` (Nsight Compute on one representative
scenario, through the suite's run_once target and its NVTX range) and `disassemble` (the kernel
built as the evaluator builds it, `cuobjdump --dump-sass`, summarized). Both parse with
suite/profiling and keep the raw output in `<trace>.d/profiles/` and `<trace>.d/sass/`.

Where a tool cannot run (a task whose kernel is not CUDA, no GPU, no ncu or cuobjdump, a permission
error) it says so to the model, with `available: false` in the trace, and returns no numbers.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from ..profiling import ncu as ncu_parse
from ..profiling import sass as sass_parse
from .childenv import child_env
from .context import RunContext
from .exceptions import ToolError
from .policy import CAP_SYS_ADMIN
from .tools import Tool, ToolResult, elide

DEFAULT_SCENARIO = "d128-h16kv16-s4096"
MAX_KERNELS_SHOWN = 3


def find_executable(name: str, override: str | None = None) -> str | None:
    """`name` on the PATH, in the CUDA toolkit, beside nvcc, in Nsight Compute's usual folders, or
    from NVIDIA's PyPI packages (nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm)."""
    if override:
        return override if os.access(override, os.X_OK) else shutil.which(override)
    found = shutil.which(name)
    if found:
        return found
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    nvcc = shutil.which("nvcc")
    if nvcc:
        roots.append(str(Path(nvcc).resolve().parent.parent))
    candidates = [f"{r}/bin/{name}" for r in roots if r]
    if name == "ncu":
        candidates += sorted(glob.glob("/opt/nvidia/nsight-compute/*/ncu"), reverse=True)
        candidates += sorted(glob.glob("/usr/local/cuda*/nsight-compute*/ncu"), reverse=True)
    try:
        import nvidia  # namespace package of NVIDIA's wheels

        for base in nvidia.__path__:
            candidates += sorted(glob.glob(f"{base}/*/bin/{name}"), reverse=True)
    except ImportError:
        pass
    return next((c for c in candidates if os.path.isfile(c) and os.access(c, os.X_OK)), None)


def cuda_arch(ctx: RunContext) -> tuple[str | None, str | None]:
    """(arch, None) for a task whose kernel is CUDA, else (None, why not)."""
    arch = getattr(ctx.task, "arch", None)
    if not ctx.task.kernel.endswith(".cu") or not arch:
        return None, (
            f"task {ctx.task.name} has no CUDA kernel ({ctx.task.kernel}); this tool looks at CUDA "
            "kernels on an NVIDIA GPU"
        )
    return arch, None


def gpu_problem(arch: str) -> str | None:
    """Why a kernel for `arch` cannot run on this machine's GPU, or None when it can."""
    from ..gpu import NoGPUError, require_gpu

    try:
        require_gpu(arch)
    except NoGPUError as e:
        return str(e)
    return None


def unavailable(tool: str, reason: str) -> ToolResult:
    return ToolResult(
        f"{tool} cannot run here: {reason}. Nothing was measured.",
        is_error=True,
        data={"available": False, "reason": reason},
    )


@dataclass
class Ran:
    returncode: int | None  # None: killed at the timeout
    stdout: str
    stderr: str


def run_command(cmd: list[str], timeout_s: float, cwd: Path, env: dict | None = None) -> Ran:
    """Runs `cmd` in its own process group, killed whole at the timeout (ncu starts the target)."""
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout_s)
        return Ran(proc.returncode, out, err)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        out, err = proc.communicate()
        return Ran(None, out or "", err or "")


def _cuda_tool(
    name: str, description: str, parameters: dict, run: Callable[[str, dict, RunContext], ToolResult]
) -> Tool:
    """A tool that looks at a CUDA kernel: for a task whose kernel is not CUDA it says so to the model
    and measures nothing; otherwise `run(arch, args, ctx)`."""

    def guarded(args: dict, ctx: RunContext) -> ToolResult:
        arch, why = cuda_arch(ctx)
        if why or arch is None:
            return unavailable(name, why or "no architecture")
        return run(arch, args, ctx)

    return Tool(name, description, parameters, guarded)


def _next_dir(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    n = 1 + max((int(p.name) for p in root.iterdir() if p.name.isdigit()), default=0)
    d = root / f"{n:04d}"
    d.mkdir()
    return d


def _copy_kernel(ctx: RunContext, out: Path) -> Path:
    src = ctx.workspace.resolve(ctx.task.kernel, must_exist=True)
    dst = out / Path(ctx.task.kernel).name
    shutil.copyfile(src, dst)
    return dst


def _tail(text: str, n: int = 25) -> str:
    lines = [l for l in text.splitlines() if l.strip()]
    return "\n".join(lines[-n:])


# ---------------------------------------------------------------- profile


@dataclass(frozen=True)
class _ProfileSetup:
    scenario_default: str
    timeout_s: float
    ncu: str | None  # the ncu to run, where the options name one


def profile_tool(options: dict) -> Tool:
    setup = _ProfileSetup(
        options.get("profile_scenario") or DEFAULT_SCENARIO,
        float(options.get("profile_timeout_s") or 600),
        options.get("ncu"),
    )
    return _cuda_tool(
        "profile",
        "Profile the workspace's kernel with Nsight Compute on one scenario (default "
        f"{setup.scenario_default}): SM and tensor-pipe throughput, DRAM and L2 throughput, occupancy, registers, "
        "shared memory, spills, top warp stalls and ncu's own findings. Needs an NVIDIA GPU.",
        {
            "type": "object",
            "properties": {"scenario": {"type": "string", "description": f"a scenario id, e.g. {DEFAULT_SCENARIO}"}},
            "additionalProperties": False,
        },
        partial(_profile, setup),
    )


def _profile(setup: _ProfileSetup, arch: str, args: dict, ctx: RunContext) -> ToolResult:
    scenario = _known_scenario(args.get("scenario") or setup.scenario_default, arch)
    exe = find_executable("ncu", setup.ncu)
    if not exe:
        return unavailable("profile", "Nsight Compute (ncu) is not installed or not on the PATH")
    why = gpu_problem(arch)
    if why:
        return unavailable("profile", why)
    out = _next_dir(ctx.trace.artifacts / "profiles")
    _copy_kernel(ctx, out)  # kept with the profile; ncu runs a copy in the sandbox
    cmd, ran, note = _run_ncu(ctx, exe, arch, scenario, setup.timeout_s)
    (out / "ncu.csv").write_text(ran.stdout)
    (out / "ncu.log").write_text(ran.stderr)
    (out / "command.json").write_text(json.dumps(cmd))
    ctx.trace.redact_tree(out)
    return _profile_result(ran, note, scenario, out, out.relative_to(ctx.trace.artifacts), setup.timeout_s)


def _known_scenario(scenario: str, arch: str) -> str:
    from ..scenarios import by_id

    if scenario not in by_id(arch):
        raise ToolError(f"unknown scenario {scenario!r} (ids look like {DEFAULT_SCENARIO} or d64-h32kv8-s2048-causal)")
    return scenario


def _run_ncu(ctx: RunContext, exe: str, arch: str, scenario: str, timeout_s: float) -> tuple[list[str], Ran, str]:
    """ncu on run_once of a copy of the kernel in the sandbox: (the command, what it did, a note for the
    model). An ncu that does not know one of the extra metrics profiles again with the sections alone."""
    seal = ctx.seal
    scratch = seal.new_scratch()
    try:
        kernel = _copy_kernel(ctx, scratch)
        target = seal.command(
            "kernelseek_suite.cli", ["run-once", str(kernel), scenario, "--arch", arch, "--reps", "1"]
        )

        def profile(extra_metrics: bool):
            cmd = ncu_parse.ncu_command(exe, target, nvtx_range=f"kernel:{scenario}", extra_metrics=extra_metrics)
            return cmd, seal.run(cmd, scratch, timeout_s, keep_caps=(CAP_SYS_ADMIN,), read=[Path(exe).resolve().parent])

        cmd, ran = profile(True)
        said = (ran.stdout + ran.stderr).lower()
        if ran.returncode is not None and "metric" in said and "error" in said and not ncu_parse.parse(ran.stdout):
            cmd, ran = profile(False)
            return cmd, ran, "this ncu refused the tensor-pipe and stall metrics; they are not reported\n"
        return cmd, ran, ""
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _profile_result(ran: Ran, note: str, scenario: str, out: Path, rel: Path, timeout_s: float) -> ToolResult:
    """What the model is told of an ncu run whose output is kept in `out` (`rel` in the trace's folder)."""
    if ran.returncode is None:
        return ToolResult(
            f"profile: ncu took longer than {timeout_s:.0f}s and was stopped; nothing measured",
            is_error=True,
            data={"available": True, "timed_out": True, "dir": str(rel)},
        )
    kernels = ncu_parse.parse(ran.stdout)
    if not kernels:
        msg = _tail(ran.stderr + "\n" + ran.stdout)
        return ToolResult(
            f"profile: ncu profiled no kernel on {scenario} (exit {ran.returncode}):\n{msg}",
            is_error=True,
            data={"available": True, "kernels": 0, "dir": str(rel)},
        )
    summaries = sorted((ncu_parse.summarize(k) for k in kernels), key=lambda s: -(s.duration_s or 0.0))
    shown = summaries[:MAX_KERNELS_SHOWN]
    (out / "summary.json").write_text(json.dumps([s.to_dict() for s in summaries], indent=1))
    head = (
        f"Nsight Compute, scenario {scenario}, one call of the kernel (clocks not locked); "
        f"{len(kernels)} kernel launch{'es' if len(kernels) > 1 else ''} profiled"
        + (f", the {len(shown)} longest shown" if len(shown) < len(kernels) else "")
        + ":"
    )
    text = note + head + "\n\n" + "\n\n".join(ncu_parse.table(s) for s in shown)
    return ToolResult(
        text,
        data={"available": True, "scenario": scenario, "dir": str(rel), "kernels": [s.to_dict() for s in shown]},
    )


# ---------------------------------------------------------------- disassemble


@dataclass(frozen=True)
class _DisassembleSetup:
    timeout_s: float
    cuobjdump: str | None  # the cuobjdump to run, where the options name one


def disassemble_tool(options: dict) -> Tool:
    setup = _DisassembleSetup(float(options.get("disassemble_timeout_s") or 300), options.get("cuobjdump"))
    return _cuda_tool(
        "disassemble",
        "Build the workspace's kernel as the evaluator does and summarize its SASS "
        "(cuobjdump --dump-sass) per function: instruction mix (MMA, LDG/STG, TMA, LDS/STS, LDL/STL spills, "
        "barriers, MUFU, FP32), registers, shared memory, and the inner loop's length. No GPU needed.",
        {
            "type": "object",
            "properties": {
                "function": {"type": "string", "description": "only functions whose name contains this"},
                "listing": {"type": "boolean", "description": "also print the first function's inner loop"},
            },
            "additionalProperties": False,
        },
        partial(_disassemble, setup),
    )


def _disassemble(setup: _DisassembleSetup, arch: str, args: dict, ctx: RunContext) -> ToolResult:
    exe = find_executable("cuobjdump", setup.cuobjdump)
    if not exe:
        return unavailable(
            "disassemble",
            "cuobjdump is not installed (it comes with the CUDA toolkit, or "
            "pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm)",
        )
    from ..build import BuildError, build
    from ..rules import DependencyRuleError

    out = _next_dir(ctx.trace.artifacts / "sass")
    kernel = _copy_kernel(ctx, out)
    try:
        built = build(kernel, arch)
    except (BuildError, DependencyRuleError) as e:
        return ToolResult(
            f"disassemble: the kernel does not build:\n{elide(str(e), 4000)}",
            is_error=True,
            data={"available": True, "built": False},
        )
    env = child_env({"PATH": f"{Path(exe).parent}{os.pathsep}{os.environ.get('PATH', '')}"})
    ran = run_command([exe, "--dump-sass", built.library], setup.timeout_s, out, env)
    (out / "kernel.sass").write_text(ran.stdout)
    ctx.trace.redact_tree(out)
    rel = out.relative_to(ctx.trace.artifacts)
    summaries = sass_parse.summarize(ran.stdout) if ran.returncode == 0 else []
    if not summaries:
        return ToolResult(
            f"disassemble: cuobjdump gave no SASS (exit {ran.returncode}):\n{_tail(ran.stderr + ran.stdout)}",
            is_error=True,
            data={"available": True, "built": True, "dir": str(rel)},
        )
    summaries = _matching(summaries, args.get("function"))
    resources = _resources(built.functions)
    text = sass_parse.table(summaries, resources)
    if args.get("listing"):
        text += "\n\n" + _loop_listing(ran.stdout, summaries[0])
    (out / "summary.json").write_text(json.dumps([s.to_dict() for s in summaries], indent=1))
    functions = [_function_data(s, resources) for s in summaries]
    return ToolResult(text, data={"available": True, "dir": str(rel), "arch": arch, "functions": functions})


def _matching(summaries: list, want: str | None) -> list:
    """The functions whose name contains `want` (all of them without one)."""
    if not want:
        return summaries
    found = [s for s in summaries if want in s.display_name or want in s.name]
    if not found:
        raise ToolError(f"no function matches {want!r}")
    return found


def _resources(functions) -> dict[str, dict]:
    """The compiler's registers, shared memory and spills of each built function, by name."""
    return {
        f.name: {
            "registers": f.registers,
            "shared_bytes": f.shared_bytes,
            "spill_bytes": f.spill_store_bytes + f.spill_load_bytes,
        }
        for f in functions
    }


def _function_data(summary, resources: dict[str, dict]) -> dict:
    return {
        "name": summary.display_name,
        "instructions": summary.instructions,
        "mix": summary.mix,
        "registers": resources.get(summary.name, {}).get("registers"),
        "inner_loop": summary.inner_loop.instructions if summary.inner_loop else None,
    }


def _loop_listing(text: str, summary, max_lines: int = 160) -> str:
    loop = summary.inner_loop
    if loop is None:
        return f"{sass_parse.short_name(summary.display_name)}: no loop with math"
    instrs = sass_parse.parse_functions(text)[summary.name]
    body = [i for i in instrs if loop.start <= i.address <= loop.end and i.op != "NOP"]
    lines = [
        f"/*{i.address:04x}*/ {i.predicate + ' ' if i.predicate else ''}{i.opcode} {i.operands}".rstrip() for i in body
    ]
    if len(lines) > max_lines:
        cut = len(lines) - max_lines
        lines = lines[: max_lines * 2 // 3] + [f"... {cut} instructions elided ..."] + lines[-max_lines // 3 :]
    return (
        f"inner loop of {sass_parse.short_name(summary.display_name)} ({loop.instructions} instructions):\n"
        + "\n".join(lines)
    )
