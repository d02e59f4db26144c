"""What a reproduce run ends with (`Outcome`), shared by the native pipeline and the container
runner, which hands the image's description to the run inside it through `IMAGE_ENV`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from . import kernels as _kernels

IMAGE_ENV = "KERNELSEEK_IMAGE"  # set by the container runner: the image's tag, id and digests (JSON)


@dataclass
class Outcome:
    arch: str
    status: str  # "measured", "partial" or "failed"
    exit_code: int
    out: Path | None = None
    runtime: str = "native"
    messages: list[str] = field(default_factory=list)
    static: list[_kernels.StaticCheck] = field(default_factory=list)
    report: Path | None = None
    summary: dict | None = None
