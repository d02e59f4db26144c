"""The sandbox's rules for the GPU tools (CUDA, nvcc, cuobjdump/nvdisasm, Nsight Compute), as data:
`sandbox_rules/gpu.json` lists, per tool, the device files, the paths to read, the environment and
what is deliberately not granted, each with why. NOT YET VERIFIED ON A GPU NODE (the file says so in
`verified_on_gpu` and `status`; docs/threat-model.md too): it was worked out from the driver's and
the toolkit's documented layout on a machine without a GPU.

`resolve()` turns the rules into what a sandbox gets: placeholders filled ({cuda_home}, {ncu_root},
{scratch}), globs expanded against the filesystem (or a test's root), paths that do not exist left
out, and never a shared writable place (/dev/shm, /dev/mqueue, /dev/hugepages), the user's home or
the repository, whatever a rule says. The evaluator's sandbox adds the resolved reads (policy.py
grants them only where they exist: nothing on a machine without the driver) and the environment;
the device files stay covered by the sandbox's own rule for /dev (every entry but the shared ones,
sandbox.py) until this list is verified and can replace it.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from .. import config as suite_config
from .sandbox import DEV_SHARED

RULES_FILE = Path(__file__).resolve().parent / "sandbox_rules" / "gpu.json"
ACCESS = ("device", "read", "write", "env", "not granted")


@dataclass
class Resolved:
    device: list[str] = field(default_factory=list)
    read: list[str] = field(default_factory=list)
    write: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    not_granted: list[str] = field(default_factory=list)  # named by a rule as deliberately not granted
    refused: list[str] = field(default_factory=list)  # a rule asked for a forbidden place: left out


def load(path: Path = RULES_FILE) -> dict:
    data = json.loads(Path(path).read_text())
    for rule in data["rules"]:
        if rule.get("access") not in ACCESS or not rule.get("why") or not rule.get("tool"):
            raise ValueError(f"{path}: a rule needs a tool, an access among {ACCESS} and a why: {rule}")
    return data


def placeholders(scratch: Path | None = None) -> dict[str, str]:
    """The values of the rules' placeholders on this machine (those it has)."""
    out: dict[str, str] = {}
    cuda = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    nvcc = shutil.which("nvcc")
    if not cuda and nvcc:
        cuda = os.path.dirname(os.path.dirname(os.path.realpath(nvcc)))
    if cuda:
        out["cuda_home"] = cuda
    ncu = shutil.which("ncu")
    if ncu:
        out["ncu_root"] = os.path.dirname(os.path.dirname(os.path.realpath(ncu)))
    if scratch is not None:
        out["scratch"] = str(scratch)
    return out


def _forbidden(path: str, root: str) -> bool:
    rel = "/" + os.path.relpath(path, root) if root != "/" else path
    if any(rel == f"/dev/{d}" or rel.startswith(f"/dev/{d}/") for d in DEV_SHARED):
        return True
    real = Path(os.path.realpath(path))
    for p in (suite_config.REPO_ROOT, Path.home()):
        p = p.resolve()
        if real == p or p in real.parents or real in p.parents:  # it, in it, or a folder holding it
            return True
    return False


def resolve(
    data: dict | None = None, values: dict[str, str] | None = None, root: str = "/", tools: tuple[str, ...] = ()
) -> Resolved:
    """The rules (of `tools`, all by default) as concrete grants on this machine, or under `root` (a
    test's stand-in for /): a path whose placeholder has no value here is left out, a glob matches
    what exists, and a forbidden place is refused."""
    data = data or load()
    values = values if values is not None else placeholders()
    out = Resolved()
    for rule in data["rules"]:
        if tools and rule["tool"] not in tools:
            continue
        if rule["access"] == "env":
            try:
                out.env.update({k: v.format(**values) for k, v in rule["env"].items()})
            except KeyError:  # a placeholder with no value here
                pass
            continue
        for pattern in rule["paths"]:
            try:
                concrete = pattern.format(**values)
            except KeyError:
                continue
            if rule["access"] == "not granted":
                out.not_granted.append(concrete)
                continue
            rooted = concrete if root == "/" else os.path.join(root, concrete.lstrip("/"))
            for path in sorted(glob.glob(rooted)):
                if _forbidden(path, root):
                    out.refused.append(path)
                    continue
                target = {"device": out.device, "read": out.read, "write": out.write}[rule["access"]]
                if path not in target:
                    target.append(path)
    return out


def env_for(scratch: Path, data: dict | None = None) -> dict[str, str]:
    """The environment the rules give a process whose scratch folder is `scratch`."""
    data = data or load()
    values = {**placeholders(), "scratch": str(scratch)}
    env = {}
    for rule in data["rules"]:
        if rule["access"] == "env":
            try:
                env.update({k: v.format(**values) for k, v in rule["env"].items()})
            except KeyError:
                pass
    return env
