"""A stand-in for the worker, for the isolation tests: it speaks the real protocol (channel.py) and
misbehaves on the scenarios its plan names.

    python fake_worker.py PLAN.json CHANNEL_FD      (job on stdin, like the real worker)

PLAN: {"actions": {scenario_id: action}, "record": path, "at_start": action, "hog_bytes": n,
       "tflops": x, "ratio": {baseline: r}, "gemm_tflops": y}

Like the real worker it waits for its library at the job's build gate where it has one (a worker
started during the build: harness/gate.py, `await_build`), then at the job's gate before its hello;
its line in `record` says when it started, the build gate it was given, when it had its library (and
which), the gate it was given, what the wait returned, when it measured (the hello) and whether the
gate's file was there then.
actions: ok, exit (os._exit), segv (SIGSEGV), hang, cuda_error (a CUDA-error row, exit 3 like the
real worker), memory (grow past the limit), forge (print forged result lines on stdout and on the
channel without the key, then report the scenario wrong), fatal (a fatal message: the kernel's library
breaks the contract), fatal_cuda (a fatal message: CUDA unusable before the hello).
"""

import json
import os
import signal
import sys
import time

from kernelseek_suite.harness.channel import MARK, WorkerChannel
from kernelseek_suite.harness.gate import await_build, wait_at_gate
from kernelseek_suite.results import ScenarioResult

SEED = None
HELD = []


def row_for(s: dict, status: str = "ok", **kw) -> dict:
    r = ScenarioResult(
        s["id"],
        f"d{s['d_qk']}-h{s['heads_q']}kv{s['heads_kv']}",
        s["batch"],
        s["seqlen_q"],
        s["seqlen_k"],
        s["causal"],
        s["extended"],
        1.0e12,
        status=status,
        seed=SEED,
        **kw,
    )
    return r.to_dict()


def act(what: str, plan: dict, chan: WorkerChannel, s: dict | None):
    if what == "exit":
        os._exit(7)
    if what == "segv":
        os.kill(os.getpid(), signal.SIGSEGV)
    if what == "hang":
        time.sleep(3600)
    if what == "memory":
        HELD.append(b"\x01" * plan.get("hog_bytes", 400 << 20))  # written pages count in the RSS
        time.sleep(3600)
    if what == "fatal":
        chan.emit("fatal", error="ContractError: kernel ABI version 7, the suite expects 1", code="contract")
        sys.exit(2)
    if what == "fatal_cuda":  # what the real worker sends when CUDA is unusable (seen on an H200 in a sandbox)
        sys.stderr.write("RuntimeError: invalid argument to exchangeDevice\n")
        chan.emit("fatal", error="RuntimeError: invalid argument to exchangeDevice", code="error")
        sys.exit(2)
    if what == "cuda_error":
        sys.stderr.write("torch.AcceleratorError: CUDA error: an illegal memory access was encountered\n")
        chan.emit(
            "result",
            row=row_for(
                s,
                "error",
                code="cuda-error",
                reason="AcceleratorError: CUDA error: an illegal memory access was encountered",
            ),
        )
        sys.exit(3)
    if what == "forge":
        forged = json.dumps({"seq": chan.seq, "kind": "result", "row": row_for(s, "ok")})
        print(MARK + "0" * 64 + " " + forged, flush=True)  # on stdout, like printf
        chan.stream.write(MARK + "f" * 64 + " " + forged + "\n")  # on the channel, unsigned
        chan.stream.flush()
        chan.emit("result", row=row_for(s, "wrong", code="unwritten", reason="nothing written"))
        return True
    return False


def main():
    started = time.time()
    plan = json.loads(open(sys.argv[1]).read())
    global SEED
    job, chan = WorkerChannel.open(sys.argv)
    build_gate = job.get("build_gate")
    job = await_build(job)
    built = time.time()  # the real worker loads the kernel's library here
    SEED = job["seed"]
    gate = wait_at_gate(job.get("gate"), lambda: chan.emit("waiting"))
    measured = time.time()  # the real worker's GEMM ceiling, and every scenario after it
    if plan.get("record"):
        with open(plan["record"], "a") as f:
            f.write(
                json.dumps(
                    {
                        "pid": os.getpid(),
                        "scenarios": [i["scenario"]["id"] for i in job["scenarios"]],
                        "distributions": job.get("distributions"),
                        "started": started,
                        "build_gate": build_gate,
                        "library": job["library"],
                        "built": built,
                        "gate": job.get("gate"),
                        "waited": gate,
                        "measured": measured,
                        "open_when_measured": bool(job.get("gate")) and os.path.exists(job["gate"]["path"]),
                    }
                )
                + "\n"
            )
    if plan.get("at_start"):
        act(plan["at_start"], plan, chan, None)
    chan.emit(
        "hello",
        device="stand-in",
        sms=1,
        gemm_tflops=plan.get("gemm_tflops", 100.0),
        device_state="checked after every call",
        baselines={},
        baseline_versions={},
        gate=gate,
    )
    for item in job["scenarios"]:
        s = item["scenario"]
        chan.emit("start", scenario=s["id"])
        if act(plan.get("actions", {}).get(s["id"], "ok"), plan, chan, s):
            continue
        time.sleep(plan.get("delay_s", 0.0))
        tflops = {"kernel": plan["tflops"]} if "tflops" in plan else {}
        chan.emit("result", row=row_for(s, "ok", tflops=tflops, ratio=plan.get("ratio", {})))
    chan.emit("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
