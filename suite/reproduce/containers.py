"""The pinned containers (`containers/<arch>/Dockerfile`): reading and pinning their base images,
checking their labels against the lock, and running `reproduce` inside one through the Docker SDK
for Python, with the GPU requested, the results folder mounted, no network, a non-root user, and
the image recorded in the provenance of every number."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .. import config
from .lock import paths as lock_paths
from .lock import read_lock
from .registry import ImageRef, parse_ref

WORKDIR = "/opt/kernelseek-suite"
DIGEST_RE = re.compile(r"@sha256:[0-9a-f]{64}$")


class ContainerError(RuntimeError):
    """Docker could not build or run the image; the message says what to do."""


def dockerfile(arch: str, root: Path = config.REPO_ROOT) -> Path:
    return Path(root) / config.REPRODUCE[arch]["container"] / "Dockerfile"


# --- the Dockerfiles ----------------------------------------------------------------------------


@dataclass
class BaseImage:
    ref: str  # as written after FROM (flags removed)
    stage: str | None  # "AS name"
    line: int  # 1-based
    image: ImageRef | None  # None for an earlier stage or scratch

    @property
    def pinned(self) -> bool:
        return self.image is None or bool(DIGEST_RE.search(self.ref))


def base_images(path: Path) -> list[BaseImage]:
    """Every FROM of a Dockerfile, with its line; FROMs that name an earlier stage or `scratch` are
    not images to pin."""
    from dockerfile_parse import DockerfileParser

    parser = DockerfileParser(path=str(path), cache_content=True)
    out, stages = [], set()
    for ins in parser.structure:
        if ins["instruction"] != "FROM":
            continue
        words = [w for w in ins["value"].split() if not w.startswith("--")]
        ref = words[0]
        stage = words[2] if len(words) >= 3 and words[1].lower() == "as" else None
        internal = ref in stages or ref == "scratch"
        out.append(BaseImage(ref, stage, ins["startline"] + 1, None if internal else parse_ref(ref)))
        if stage:
            stages.add(stage)
    return out


def unpinned(path: Path) -> list[BaseImage]:
    return [b for b in base_images(path) if not b.pinned]


def labels(path: Path) -> dict[str, str]:
    from dockerfile_parse import DockerfileParser

    return dict(DockerfileParser(path=str(path), cache_content=True).labels)


def pin(path: Path, resolve: Callable[[str], str]) -> list[tuple[str, str]]:
    """Fill in or refresh the digest of every FROM from its tag (`resolve(tag_ref) -> digest`);
    returns (old, new) for each FROM that changed, and rewrites the file."""
    lines = Path(path).read_text().splitlines(keepends=True)
    changes = []
    for b in base_images(path):
        if b.image is None:
            continue
        tag_ref = b.ref.split("@", 1)[0]
        new_ref = f"{tag_ref}@{resolve(tag_ref)}"
        if new_ref != b.ref:
            i = b.line - 1
            lines[i] = lines[i].replace(b.ref, new_ref, 1)
            changes.append((b.ref, new_ref))
    if changes:
        Path(path).write_text("".join(lines))
    return changes


def label_problems(arch: str, root: Path = config.REPO_ROOT) -> list[str]:
    """The image's labels must say what is in it: the arch, the base image and CUDA version of its
    FROM, and the versions requirements.lock pins."""
    path = dockerfile(arch, root)
    lab = labels(path)
    pins = {p.name: p.version for p in read_lock(lock_paths(arch, root)[1])}
    problems = []
    if lab.get("io.kernelseek.arch") != arch:
        problems.append(f"io.kernelseek.arch is {lab.get('io.kernelseek.arch')!r}, not {arch!r}")
    bases = [b for b in base_images(path) if b.image]
    if bases:
        b = bases[-1].image
        named = lab.get("org.opencontainers.image.base.name", "")
        if parse_ref(named) != ImageRef(b.registry, b.repository, b.tag):
            problems.append(f"org.opencontainers.image.base.name {named!r} is not the FROM image {bases[-1].ref!r}")
        cuda = re.match(r"(\d+\.\d+\.\d+)", b.tag)
        if cuda and lab.get("io.kernelseek.cuda") != cuda.group(1):
            problems.append(
                f"io.kernelseek.cuda is {lab.get('io.kernelseek.cuda')!r}, the base image's tag says {cuda.group(1)}"
            )
    if lab.get("io.kernelseek.torch") != pins.get("torch"):
        problems.append(f"io.kernelseek.torch is {lab.get('io.kernelseek.torch')!r}, the lock pins {pins.get('torch')}")
    for key, pkg in (("io.kernelseek.fa3", "fa3-fwd"), ("io.kernelseek.fa4", "flash-attn-4")):
        if key in lab and lab[key] != f"{pkg}=={pins.get(pkg)}":
            problems.append(f"{key} is {lab[key]!r}, the lock pins {pkg}=={pins.get(pkg)}")
        if pkg in pins and key not in lab:
            problems.append(f"{key} is missing; the lock pins {pkg}=={pins[pkg]}")
    return problems


# --- the engine ---------------------------------------------------------------------------------


def client(timeout: int = 10):
    try:
        import docker
    except ImportError as e:
        raise ContainerError(
            "the Docker SDK for Python is not installed: pip install 'kernelseek-suite[docker]'"
        ) from e
    try:
        return docker.from_env(timeout=timeout)
    except Exception as e:
        raise ContainerError(explain(e)) from e


def nvidia_runtime(info: dict) -> bool:
    """The engine can hand GPUs to containers: the nvidia runtime is registered, or CDI specs
    (the NVIDIA Container Toolkit's other way) are there."""
    runtimes = info.get("Runtimes") or {}
    return (
        "nvidia" in runtimes
        or info.get("DefaultRuntime") == "nvidia"
        or any("nvidia" in str(d) for d in (info.get("DiscoveredDevices") or []))
    )


NO_ENGINE_FIX = (
    "start the Docker engine (`sudo systemctl start docker`) and make it reachable for this user "
    "(`sudo usermod -aG docker $USER`, then log in again), or set DOCKER_HOST; or use --runtime native"
)
NO_GPU_RUNTIME_FIX = (
    "install the NVIDIA Container Toolkit, then `sudo nvidia-ctk runtime configure --runtime=docker` "
    "and `sudo systemctl restart docker`; check with `docker run --rm --gpus all "
    "nvidia/cuda:13.0.1-base-ubuntu24.04 nvidia-smi`; or use --runtime native"
)


def explain(e: BaseException) -> str:
    """Docker's own words, with what to do about them."""
    text = str(e)
    if "could not select device driver" in text or "unknown or invalid runtime name: nvidia" in text:
        return f"Docker cannot give the container a GPU ({text.strip()[:200]}): {NO_GPU_RUNTIME_FIX}"
    if any(
        s in text
        for s in (
            "Connection aborted",
            "Connection refused",
            "FileNotFoundError",
            "No such file",
            "Error while fetching server API version",
        )
    ):
        return f"the Docker engine is not reachable ({text.strip()[:160]}): {NO_ENGINE_FIX}"
    if "permission denied" in text.lower():
        return f"no permission to use the Docker engine ({text.strip()[:160]}): {NO_ENGINE_FIX}"
    return text.strip()[:500]


def docker_ready(make_client: Callable = client) -> tuple[bool, str]:
    """(usable, why not): the engine answers and can give containers a GPU."""
    try:
        cli = make_client()
        cli.ping()
        info = cli.info()
    except ContainerError as e:
        return False, str(e)
    except Exception as e:
        return False, explain(e)
    if not nvidia_runtime(info):
        return False, f"the Docker engine has no NVIDIA runtime: {NO_GPU_RUNTIME_FIX}"
    return True, "ok"


def _context_files(root: Path) -> list[Path]:
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "ls-files", "-co", "--exclude-standard", "-z"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
        names = [n for n in out.split("\0") if n]
    except (OSError, subprocess.SubprocessError):
        names = [
            str(p.relative_to(root)) for d in ("suite", "kernels", "containers") for p in (Path(root) / d).rglob("*")
        ]
        names += ["pyproject.toml"]
    return sorted(
        Path(root) / n for n in names if not n.startswith(("results/", ".git")) and (Path(root) / n).is_file()
    )


def image_tag(arch: str, root: Path = config.REPO_ROOT) -> str:
    """The tag of the image for this checkout: the content of the build context decides it, so a
    changed kernel, suite or lock builds a new image and an unchanged one is reused."""
    h = hashlib.sha256()
    for p in _context_files(root):
        h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes() + b"\0")
    return f"kernelseek-suite:{arch}-{h.hexdigest()[:12]}"


def _image_info(image, tag: str, base: str, built: bool, build_s: float | None) -> dict:
    attrs = getattr(image, "attrs", {}) or {}
    return {
        "tag": tag,
        "id": image.id,
        "repo_digests": attrs.get("RepoDigests") or [],
        "base": base,
        "labels": getattr(image, "labels", {}) or {},
        "built": built,
        "build_s": build_s,
        "size_bytes": attrs.get("Size"),
    }


def ensure_image(cli, arch: str, root: Path, rebuild: bool = False, notify=lambda m: None) -> dict:
    """Reuse the image of this checkout's content, or build it. Returns what provenance records."""
    import docker

    from ..provenance import git_sha

    tag = image_tag(arch, root)
    bases = [b.ref for b in base_images(dockerfile(arch, root)) if b.image]
    base = bases[-1] if bases else ""
    if not rebuild:
        try:
            image = cli.images.get(tag)
            notify(f"image: reusing {tag} ({image.id[:19]})")
            return _image_info(image, tag, base, False, None)
        except docker.errors.ImageNotFound:
            pass
    notify(
        f"image: building {tag} from {dockerfile(arch, root).relative_to(root)} (the first build downloads "
        "the CUDA base image and several GB of wheels)"
    )
    t0 = time.time()
    try:
        image, logs = cli.images.build(
            path=str(root),
            dockerfile=str(dockerfile(arch, root).relative_to(root)),
            tag=tag,
            buildargs={"GIT_SHA": git_sha(root) or "unknown"},
            rm=True,
        )
        for chunk in logs:
            line = (chunk.get("stream") or "").strip()
            if line.startswith("Step "):
                notify(f"  {line[:160]}")
    except docker.errors.BuildError as e:
        tail = [c.get("stream", c.get("error", "")).strip() for c in e.build_log][-8:]
        raise ContainerError(f"the image did not build: {e.msg}\n  " + "\n  ".join(t for t in tail if t)) from e
    except docker.errors.APIError as e:
        raise ContainerError(explain(e)) from e
    build_s = round(time.time() - t0, 1)
    info = _image_info(image, tag, base, True, build_s)
    notify(f"image: built {tag} in {build_s:.0f} s, {(info['size_bytes'] or 0) / 2**30:.1f} GiB")
    return info


def run_in_container(req, notify=lambda m: None, cli=None):
    """`reproduce` inside the image: the GPU requested, the results folder mounted read-write, the
    host user's uid (not root), no network. Returns the pipeline's Outcome."""
    import docker
    from docker.types import DeviceRequest

    from ..contracts.exitcodes import FAIL, OK
    from ..provenance import git_sha
    from .outcome import IMAGE_ENV, Outcome

    cli = cli or client()
    root = Path(req.root)
    info = ensure_image(cli, req.arch, root, req.rebuild_image, notify)
    out = req.results_dir().resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    cmd = [
        "reproduce",
        "--arch",
        req.arch,
        "--runtime",
        "native",
        "--gpu",
        "0",
        "--out",
        f"{WORKDIR}/results/{out.name}",
    ]
    if req.seed is not None:
        cmd += ["--seed", str(req.seed)]
    if req.scenario_filter:
        cmd += ["--scenarios", req.scenario_filter]
    if not req.extended:
        cmd += ["--no-extended"]
    if req.resume:
        cmd += ["--resume"]
    recorded = {k: info[k] for k in ("tag", "id", "repo_digests", "base", "labels", "built", "build_s", "size_bytes")}
    # the host uid has no passwd entry in the image: HOME and USER keep caches and getpass() working
    env = {
        IMAGE_ENV: json.dumps(recorded),
        "HOME": "/tmp",
        "USER": "kernelseek",
        "LOGNAME": "kernelseek",
        "KERNELSEEK_GIT_SHA": git_sha(root) or "unknown",
    }
    notify(f"container: {info['tag']} on GPU {req.gpu_index}, results -> {out}")
    try:
        container = cli.containers.run(
            info["tag"],
            cmd,
            detach=True,
            environment=env,
            user=f"{os.getuid()}:{os.getgid()}",
            device_requests=[DeviceRequest(device_ids=[str(req.gpu_index)], capabilities=[["gpu"]])],
            volumes={str(out.parent): {"bind": f"{WORKDIR}/results", "mode": "rw"}},
            network_mode="none",
            shm_size="8g",
            init=True,
        )
    except docker.errors.APIError as e:
        raise ContainerError(explain(e)) from e
    try:
        for chunk in container.logs(stream=True, follow=True):
            for line in chunk.decode(errors="replace").splitlines():
                notify(f"  | {line}")
        rc = int(container.wait().get("StatusCode", FAIL))
    finally:
        try:
            container.remove(force=True)
        except docker.errors.APIError:
            pass
    report = out / "REPORT.md"
    return Outcome(
        req.arch,
        "measured" if report.exists() and rc in (OK, FAIL) else "failed",
        rc,
        out,
        "docker",
        [f"container exited with {rc}", f"report: {report}" if report.exists() else "no report written"],
        report=report if report.exists() else None,
    )
