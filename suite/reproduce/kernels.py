"""Which kernels a reproduction uses, and the static checks that need no GPU: the dependency-free
rule and a real nvcc build (with ptxas's resource report) of every kernel for its architecture."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from .. import config


@dataclass
class KernelPlan:
    arch: str
    kernel: Path  # the one that is benched
    arch_kernel: Path  # the architecture's own kernel (may not exist)
    stand_in: str = ""  # why another kernel is benched instead, if it is
    missing: list[str] = field(default_factory=list)  # kernels of any architecture not in the checkout


def arch_kernel(arch: str, root: Path) -> Path:
    return Path(root) / config.REPRODUCE[arch]["kernel"]


def missing_kernels(root: Path) -> list[str]:
    return [config.REPRODUCE[a]["kernel"] for a in config.REPRODUCE if not arch_kernel(a, root).exists()]


def plan(arch: str, root: Path) -> KernelPlan:
    own = arch_kernel(arch, root)
    ref = Path(root) / config.REFERENCE_KERNEL
    if own.exists():
        return KernelPlan(arch, own, own, missing=missing_kernels(root))
    why = (
        f"the {arch} kernel {config.REPRODUCE[arch]['kernel']} is not in this checkout; the reference kernel "
        f"{config.REFERENCE_KERNEL} is benched in its place"
    )
    return KernelPlan(arch, ref, own, stand_in=why, missing=missing_kernels(root))


@dataclass
class StaticCheck:
    kernel: str
    arch: str
    rule: str  # "ok" or the violations
    build: str  # "ok", "skipped: ...", or the compiler's error
    registers: int | None = None
    shared_bytes: int | None = None
    spill_bytes: int | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.rule == "ok" and (self.build == "ok" or self.build.startswith("skipped"))

    def to_dict(self) -> dict:
        return {**asdict(self), "ok": self.ok}


def static_targets(root: Path) -> list[tuple[Path, str]]:
    """(kernel, arch) for every architecture's own kernel that exists, and the reference kernel
    for every architecture."""
    out = []
    for arch in config.REPRODUCE:
        own = arch_kernel(arch, root)
        if own.exists():
            out.append((own, arch))
        ref = Path(root) / config.REFERENCE_KERNEL
        if ref.exists():
            out.append((ref, arch))
    return out


def static_check(kernel: Path, arch: str, root: Path) -> StaticCheck:
    from ..build import BuildError, build, nvcc_path
    from ..rules import check_source

    rel = str(Path(kernel).resolve().relative_to(Path(root).resolve())) if Path(kernel).is_absolute() else str(kernel)
    violations = check_source(Path(kernel).read_text(), rel)
    rule = "ok" if not violations else "; ".join(str(v) for v in violations)
    if violations:
        return StaticCheck(rel, arch, rule, "skipped: the rule check failed")
    if not nvcc_path():
        return StaticCheck(rel, arch, rule, "skipped: nvcc not found (install the CUDA toolkit 12.8+)")
    try:
        r = build(kernel, arch)
    except BuildError as e:
        return StaticCheck(rel, arch, rule, str(e)[:2000])
    main = max(r.functions, key=lambda f: f.registers, default=None)
    return StaticCheck(
        rel,
        arch,
        rule,
        "ok",
        main.registers if main else None,
        main.shared_bytes if main else None,
        r.spill_bytes,
        r.warnings,
    )


def static_checks(root: Path, notify=None) -> list[StaticCheck]:
    out = []
    for kernel, arch in static_targets(root):
        if notify:
            notify(f"static check: {Path(kernel).relative_to(root)} for {arch}")
        out.append(static_check(kernel, arch, root))
    return out
