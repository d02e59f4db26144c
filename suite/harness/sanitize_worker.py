"""What compute-sanitizer runs (see sanitize.py): the kernel once per scenario, with inputs made on
the host and copied to the GPU, so the kernel's are the only GPU kernels launched.

Run as `python -m kernelseek_suite.harness.sanitize_worker JOB.json`.
"""

from __future__ import annotations

import json
import sys

from ..contracts import exitcodes


def main(argv=None) -> int:
    import torch

    from ..contract import KernelLibrary, make_params
    from ..scenarios import Scenario
    from .inputs import make_inputs, scenario_seed

    argv = sys.argv[1:] if argv is None else argv
    job = json.loads(open(argv[0]).read())
    lib = KernelLibrary(job["library"])
    stream = torch.cuda.current_stream()
    for d in job["scenarios"]:
        scn = Scenario(**d)
        q, k, v = (t.cuda() for t in make_inputs(scn, scenario_seed(int(job["seed"]), scn.id), device="cpu"))
        out = torch.full((scn.batch, scn.seqlen_q, scn.heads_q, scn.d_v), float("nan"), dtype=torch.bfloat16).cuda()
        lse = torch.full((scn.batch, scn.heads_q, scn.seqlen_q), float("nan"), dtype=torch.float32).cuda()
        rc = lib.forward(make_params(q, k, v, out, lse, scn.causal, scn.softmax_scale), stream.cuda_stream)
        torch.cuda.synchronize()
        print(f"{scn.id}: returned {rc}", flush=True)
        del q, k, v, out, lse
    return exitcodes.OK


if __name__ == "__main__":
    sys.exit(main())
