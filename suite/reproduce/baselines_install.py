"""`make reproduce` on a GPU machine with a package index: the baselines the run measures, installed
into the run's venv before it starts. They are the architecture's pins in `containers/<arch>/
requirements.in` (sm90: FA3's `fa3-fwd`, FA4's `flash-attn-4` and its CuTe DSL; cuDNN comes with
torch), without torch: the machine's own CUDA build stays. Nothing is installed without a suitable GPU
(the run then measures nothing), and a package that cannot be installed (no index, no wheel for this
platform) stops nothing: the run reports it as "not installed". A GPU node with no index takes the
wheelhouse instead (`make reproduce WHEELHOUSE=DIR`, offline-nodes.md).

    python -m kernelseek_suite.reproduce.baselines_install --arch sm90
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from .. import config
from ..contracts.exitcodes import OK

KEEP = ("torch",)  # the machine's own build is used


def baseline_requirements(arch: str, root: Path = config.REPO_ROOT) -> list[str]:
    """The requirement lines of containers/<arch>/requirements.in but torch's (none for an
    architecture without a container)."""
    path = root / "containers" / arch / "requirements.in"
    if not path.is_file():
        return []
    lines = path.read_text().splitlines()
    reqs = [ln.split("#", 1)[0].strip() for ln in lines]
    return [r for r in reqs if r and _name(r) not in KEEP]


def _name(req: str) -> str:
    for sep in ("[", "=", "<", ">", "!", "~", ";", " "):
        req = req.split(sep, 1)[0]
    return req.strip().lower()


def _has_gpu(arch: str) -> str | None:
    """None where a GPU of `arch` is here, else why not."""
    from ..gpu import NoGPUError, default_gpu_index, require_gpu

    try:
        require_gpu(arch, default_gpu_index())
    except NoGPUError as e:
        return str(e)
    return None


def install(
    arch: str,
    python: str = sys.executable,
    say: Callable[[str], None] = print,
    gpu_missing: Callable[[str], str | None] = _has_gpu,
    run: Callable[..., subprocess.CompletedProcess] = subprocess.run,
    pip_args: tuple[str, ...] = ("--retries", "1", "--timeout", "20"),
) -> list[str]:
    """Installs the baselines of `arch` with pip; returns those it could not install (all of them
    when pip failed, none when there is no GPU to measure them on: nothing is tried then)."""
    reqs = baseline_requirements(arch)
    if not reqs:
        return []
    why = gpu_missing(arch)
    if why is not None:
        say(f"baselines: not installed ({why.splitlines()[0]}): the run measures nothing here")
        return []
    say(f"baselines: pip install {' '.join(reqs)}")
    r = run(
        [python, "-m", "pip", "install", "-q", *pip_args, *reqs],
        capture_output=True,
        text=True,
    )
    if r.returncode == 0:
        return []
    tail = " ".join((r.stderr or r.stdout or "").strip().splitlines()[-2:])[:300]
    say(
        f"baselines: could not install {', '.join(reqs)} ({tail}); the run goes on and reports them as "
        "not installed (a node without an index: make reproduce WHEELHOUSE=DIR, docs/offline-nodes.md)"
    )
    return reqs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kernelseek_suite.reproduce.baselines_install")
    ap.add_argument("--arch", choices=sorted(config.ARCHES), default="sm90")
    install(ap.parse_args(argv).arch)
    return OK  # never stops the run: what is missing, it reports


if __name__ == "__main__":
    sys.exit(main())
