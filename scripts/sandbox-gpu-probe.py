"""Works out, on a GPU node, what the sealed evaluator's Landlock sandbox must grant for CUDA: runs a
small CUDA program (torch) and one scenario's check (`run-once`) through the sealed copy, first without the
sandbox, then under it as the suite applies it, then under it with one kind of access widened at a
time (every path readable, every device file, every capability kept), and, where strace is there,
lists the paths the sandbox refused. Prints what it found; exits 0 when the sandboxed check passes.

    python3 scripts/sandbox-gpu-probe.py [--scenario ID] [--kernel K.cu] [--timeout S]
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from kernelseek_suite.agents import sandbox as sandbox_mod
from kernelseek_suite.agents.seal import SealedEvaluator
from kernelseek_suite.agents.tasks import make_task

CUDA_SNIPPET = (
    "import torch; n = torch.cuda.device_count(); print('devices', n); "
    "x = torch.randn(256, 256, device='cuda'); "
    "print('matmul', float((x @ x).sum()) != 0.0, torch.cuda.get_device_name())"
)


BASELINE_SNIPPET = """\
import traceback
from kernelseek_suite import baselines
from kernelseek_suite.scenarios import by_id
b = baselines.get({name!r})
print("available:", b.available())
try:
    import torch
    scn = by_id("sm90")[{scenario!r}]
    fn = b.prepare(scn)
    q, k, v = (torch.randn(1, 128, scn.heads_q if i == 0 else scn.heads_kv, scn.d_qk if i < 2 else scn.d_v,
                           device="cuda", dtype=torch.bfloat16) for i in range(3))
    print("called:", tuple(fn(q, k, v).shape))
except Exception:
    traceback.print_exc()
    raise SystemExit(3)
"""


def tail(text: str, lines: int = 12) -> str:
    return "\n".join("    " + ln for ln in text.strip().splitlines()[-lines:])


def run_variant(seal: SealedEvaluator, name: str, argv: list[str], policy, timeout: float) -> int | None:
    scratch = seal.new_scratch()
    pol = policy(scratch)
    if pol.uid is not None:
        seal._hand_over(scratch, pol.uid)
    full = sandbox_mod.wrap(argv, pol, launcher=str(seal.path("lib/kernelseek_suite/agents/sandbox.py")))
    env = {**os.environ, "HOME": str(scratch / "home"), "TMPDIR": str(scratch / "tmp")}
    try:
        p = subprocess.run(full, cwd=scratch, env=env, capture_output=True, text=True, timeout=timeout)
        rc, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        rc, out, err = None, str(e.stdout or ""), str(e.stderr or "")
    print(f"\n[{name}] rc={rc}\n  stdout:\n{tail(out)}\n  stderr:\n{tail(err)}", flush=True)
    return rc


def strace_refusals(seal: SealedEvaluator, argv: list[str], timeout: float) -> None:
    strace = shutil.which("strace")
    if not strace:
        print("\n[strace] not on this machine", flush=True)
        return
    scratch = seal.new_scratch()
    log = Path(tempfile.mkdtemp()) / "trace"
    full = sandbox_mod.wrap(
        argv, seal.policy(scratch), launcher=str(seal.path("lib/kernelseek_suite/agents/sandbox.py"))
    )
    subprocess.run([strace, "-f", "-Z", "-o", str(log), *full], cwd=scratch, capture_output=True, timeout=timeout)
    refused: dict[str, str] = {}
    for line in log.read_text(errors="replace").splitlines():
        m = re.search(r'"(/[^"]*)".*= -1 (EACCES|EPERM|ENOENT|ENXIO)', line)
        if m and m.group(2) != "ENOENT":
            refused.setdefault(m.group(1), m.group(2))
        elif "ioctl(" in line and ("EACCES" in line or "EPERM" in line):
            refused.setdefault(line[:160], "ioctl")
    print(f"\n[strace] {len(refused)} refused paths (EACCES/EPERM/ENXIO):", flush=True)
    for path, why in list(refused.items())[:60]:
        print(f"    {why:6} {path}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenario", default="d64-h32kv32-s512")
    ap.add_argument("--kernel", default="kernels/hopper/flash_fwd_sm90.cu")
    ap.add_argument("--timeout", type=float, default=240)
    ap.add_argument(
        "--baseline",
        action="append",
        default=[],
        help="also import, call and time this baseline under the sandbox (repeatable)",
    )
    ap.add_argument("--quick", action="store_true", help="only the sandbox as the suite applies it, and the check")
    args = ap.parse_args()

    print("landlock:", sandbox_mod.landlock_status(), flush=True)
    print("python:", sys.executable, "->", os.path.realpath(sys.executable))
    print("device files:", " ".join(sorted(glob.glob("/dev/nvidia*"))) or "none")
    for p in sorted(glob.glob("/dev/nvidia*")):
        st = os.stat(p)
        print(f"    {p} mode {oct(st.st_mode & 0o777)} uid {st.st_uid} gid {st.st_gid}")
    task = make_task("fa-fwd-sm90")
    seal = SealedEvaluator.create(task, sandbox="landlock")
    try:
        gpu = seal.gpu
        print("gpu rules resolved: reads", gpu.read, "device", gpu.device, "env", gpu.env)
        print("the evaluations run as:", seal.describe()["runs_as"])
        snippet = [sys.executable, "-I", "-S", "-B", str(seal.path("run.py")), "-c", CUDA_SNIPPET]

        def as_suite(s):
            return seal.policy(s)

        def all_reads(s):
            p = seal.policy(s)
            return dataclasses.replace(p, read=("/",))

        def all_dev(s):
            p = seal.policy(s)
            return dataclasses.replace(p, dev=("/dev",))

        def all_caps(s):
            p = seal.policy(s)
            return dataclasses.replace(p, keep_caps=tuple(range(41)), uid=None)

        def everything(s):
            p = seal.policy(s)
            return dataclasses.replace(p, read=("/",), write=(*p.write, "/tmp", "/dev/shm"), dev=("/dev",))

        plain = subprocess.run(snippet, capture_output=True, text=True, timeout=args.timeout)
        print(f"\n[no sandbox] rc={plain.returncode}\n{tail(plain.stdout)}\n{tail(plain.stderr)}", flush=True)
        results = {}
        variants = (
            ("as the suite applies it", as_suite),
            ("every path readable", all_reads),
            ("every device file", all_dev),
            ("every capability kept (as root)", all_caps),
            ("every path readable, every device file, /tmp and /dev/shm writable", everything),
        )
        for name, pol in variants[:1] if args.quick else variants:
            results[name] = run_variant(seal, name, snippet, pol, args.timeout)
        if results["as the suite applies it"] != 0:
            strace_refusals(seal, snippet, args.timeout)

        # one scenario checked on every input distribution (run-once), the way the task runs `eval`:
        # the sealed copy, a scratch folder of its own, the allow-listed environment
        scratch = seal.new_scratch()
        kernel = scratch / "work" / Path(args.kernel).name
        kernel.parent.mkdir()
        (scratch / "out").mkdir()
        shutil.copyfile(args.kernel, kernel)
        argv = ["run-once", str(kernel), args.scenario, "--arch", "sm90", "--check", "--inputs", "all"]
        ran = seal.run(seal.command("kernelseek_suite.cli", argv), scratch, args.timeout)
        print(f"\n[run-once {args.scenario} --check --inputs all, sealed, sandboxed] rc={ran.returncode}")
        print(f"  stdout:\n{tail(ran.stdout, 10)}\n  stderr:\n{tail(ran.stderr, 20)}")
        # each baseline the task measures against, imported and called through the sealed copy under the
        # sandbox (what its evaluation does before the timed phase), with the whole traceback where it
        # fails, and the same scenario timed beside it (run-once --time --baseline)
        base_ok = True
        for name in args.baseline:
            code = BASELINE_SNIPPET.format(name=name, scenario=args.scenario)
            s2 = seal.new_scratch()
            got = seal.run([sys.executable, "-I", "-S", "-B", str(seal.path("run.py")), "-c", code], s2, args.timeout)
            print(f"\n[baseline {name}: import and one call, sealed, sandboxed] rc={got.returncode}")
            print(f"  stdout:\n{tail(got.stdout, 10)}\n  stderr:\n{tail(got.stderr, 40)}")
            timed = seal.run(
                seal.command("kernelseek_suite.cli", [*argv[:3], "--arch", "sm90", "--time", "--baseline", name]),
                scratch,
                args.timeout,
            )
            print(f"\n[run-once {args.scenario} --time --baseline {name}, sealed, sandboxed] rc={timed.returncode}")
            print(f"  stdout:\n{tail(timed.stdout, 10)}\n  stderr:\n{tail(timed.stderr, 20)}")
            base_ok = base_ok and got.returncode == 0 and timed.returncode == 0
        return 0 if ran.returncode == 0 and base_ok else 1
    finally:
        seal.close()


if __name__ == "__main__":
    sys.exit(main())
