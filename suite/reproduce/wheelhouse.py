"""A wheelhouse for GPU nodes with no internet: the pinned wheels of one architecture's lock (the
baselines, torch and their dependencies) and the suite itself, stored so that no file is larger than
a limit you set (say 60 MB), with a manifest that lets the other side check and rebuild every wheel.

A wheel over the limit is split into numbered parts (`split`), or first re-compressed with xz and
split only if still too large (`xz`: slower, often smaller: wheels are zip files of compiled code).

    kernelseek-suite wheelhouse --arch sm90 DIR [--max-mb 60] [--pack split|xz] [--skip 'nvidia-*']
    make reproduce ARCH=sm90 WHEELHOUSE=DIR        # checks, rebuilds and installs with no index

This module uses the standard library only, so the node can run it before anything is installed:
`python3 suite/reproduce/wheelhouse.py install DIR --python .venv/bin/python --root .`
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import json
import lzma
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path


def _exit_codes():
    """contracts/exitcodes.py, which imports nothing, loaded by its path: this file also runs as a
    script (`python suite/reproduce/wheelhouse.py`) before the suite is installed."""
    import importlib.util

    path = Path(__file__).resolve().parent.parent / "contracts" / "exitcodes.py"
    spec = importlib.util.spec_from_file_location("kernelseek_suite_exitcodes", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


exitcodes = _exit_codes()


SCHEMA = 1
MANIFEST = "manifest.json"
LOCK_NAME = "requirements.lock"
SUITE_PREFIX = "kernelseek_suite-"
CHUNK = 1 << 20


class WheelhouseError(RuntimeError):
    pass


@dataclass
class Part:
    name: str
    size: int
    sha256: str


@dataclass
class Entry:
    name: str  # the file as it was downloaded (a wheel, or the lock)
    size: int
    sha256: str
    encoding: str  # "raw" or "xz"
    parts: list[Part] = field(default_factory=list)


@dataclass
class Manifest:
    arch: str
    max_bytes: int
    created: str
    files: list[Entry]
    schema: int = SCHEMA
    note: str = ""

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    @classmethod
    def from_json(cls, text: str) -> Manifest:
        d = json.loads(text)
        if d.get("schema") != SCHEMA:
            raise WheelhouseError(f"manifest schema {d.get('schema')} is not {SCHEMA}")
        files = [Entry(**{**e, "parts": [Part(**p) for p in e["parts"]]}) for e in d.pop("files")]
        return cls(files=files, **d)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(CHUNK), b""):
            h.update(block)
    return h.hexdigest()


def _xz(src: Path, dst: Path) -> None:
    with open(src, "rb") as fi, lzma.open(dst, "wb", preset=6) as fo:
        shutil.copyfileobj(fi, fo, CHUNK)


def _store(src: Path, dest: Path, name: str, max_bytes: int) -> list[Part]:
    """Copy `src` into `dest` as `name`, or as `name.part000`, ... each at most max_bytes."""
    size = src.stat().st_size
    if size <= max_bytes:
        shutil.copyfile(src, dest / name)
        return [Part(name, size, sha256_file(dest / name))]
    parts = []
    with open(src, "rb") as f:
        i = 0
        while True:
            block = f.read(max_bytes)
            if not block:
                break
            pname = f"{name}.part{i:03d}"
            (dest / pname).write_bytes(block)
            parts.append(Part(pname, len(block), hashlib.sha256(block).hexdigest()))
            i += 1
    return parts


def pack(src: Path, dest: Path, max_bytes: int, arch: str, strategy: str = "split") -> Manifest:
    """Store every file of `src` into `dest` under the size limit and write the manifest."""
    if strategy not in ("split", "xz"):
        raise WheelhouseError(f"unknown packing {strategy!r}: split or xz")
    if max_bytes < 1024:
        raise WheelhouseError("the size limit must be at least 1 KiB")
    dest.mkdir(parents=True, exist_ok=True)
    entries = []
    with tempfile.TemporaryDirectory(prefix="ks-wheelhouse-") as tmp:
        for f in sorted(p for p in Path(src).iterdir() if p.is_file()):
            size, digest = f.stat().st_size, sha256_file(f)
            source, encoding, name = f, "raw", f.name
            if size > max_bytes and strategy == "xz":
                packed = Path(tmp) / (f.name + ".xz")
                _xz(f, packed)
                if packed.stat().st_size < size:
                    source, encoding, name = packed, "xz", packed.name
            entries.append(Entry(f.name, size, digest, encoding, _store(source, dest, name, max_bytes)))
    m = Manifest(
        arch,
        max_bytes,
        time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        entries,
        note="rebuild with `python3 suite/reproduce/wheelhouse.py unpack DIR OUT` or `make reproduce WHEELHOUSE=DIR`",
    )
    (dest / MANIFEST).write_text(m.to_json())
    return m


def read_manifest(wheelhouse: Path) -> Manifest:
    path = Path(wheelhouse) / MANIFEST
    if not path.exists():
        raise WheelhouseError(f"{path} is missing: {wheelhouse} is not a wheelhouse")
    return Manifest.from_json(path.read_text())


def verify(wheelhouse: Path) -> list[str]:
    """What is wrong with the stored parts (missing, wrong size, wrong sha256); empty when sound."""
    problems = []
    m = read_manifest(wheelhouse)
    for e in m.files:
        for p in e.parts:
            f = Path(wheelhouse) / p.name
            if not f.exists():
                problems.append(f"{p.name} (part of {e.name}) is missing")
            elif f.stat().st_size != p.size:
                problems.append(f"{p.name} has {f.stat().st_size} bytes, the manifest says {p.size}")
            elif sha256_file(f) != p.sha256:
                problems.append(f"{p.name} does not match its sha256 (damaged in transfer?)")
            elif f.stat().st_size > m.max_bytes:
                problems.append(f"{p.name} is larger than the limit of {m.max_bytes} bytes")
    return problems


def unpack(wheelhouse: Path, dest: Path) -> list[Path]:
    """Check every part, then rebuild every file into `dest` and check it against its sha256."""
    problems = verify(wheelhouse)
    if problems:
        raise WheelhouseError(f"{wheelhouse} is not sound:\n  " + "\n  ".join(problems))
    dest.mkdir(parents=True, exist_ok=True)
    out = []
    for e in read_manifest(wheelhouse).files:
        target = dest / e.name
        with tempfile.NamedTemporaryFile(dir=dest, delete=False) as joined:
            for p in e.parts:
                with open(Path(wheelhouse) / p.name, "rb") as f:
                    shutil.copyfileobj(f, joined, CHUNK)
        joined_path = Path(joined.name)
        if e.encoding == "xz":
            with lzma.open(joined_path, "rb") as fi, open(target, "wb") as fo:
                shutil.copyfileobj(fi, fo, CHUNK)
            joined_path.unlink()
        else:
            joined_path.replace(target)
        if sha256_file(target) != e.sha256 or target.stat().st_size != e.size:
            raise WheelhouseError(f"{e.name} rebuilt from its parts does not match its sha256")
        out.append(target)
    return out


def _canon(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def download(
    arch: str,
    raw: Path,
    root: Path,
    skip: tuple[str, ...] = (),
    index_args: tuple[str, ...] = (),
    include_suite: bool = True,
    timeout: float = 3600,
) -> list[Path]:
    """Download the architecture's pinned wheels (hashes checked) for the image's target, and build
    the suite's own wheel, into `raw`. `skip`: glob patterns of project names to leave out (e.g.
    torch and nvidia-* on nodes that have a CUDA torch already)."""
    from .lock import paths, read_lock, render_lock, target_args

    raw.mkdir(parents=True, exist_ok=True)
    pins = [p for p in read_lock(paths(arch, root)[1]) if not any(fnmatch.fnmatch(p.name, s) for s in skip)]
    lock_text = render_lock(arch, pins)
    (raw / LOCK_NAME).write_text(lock_text)
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--require-hashes",
        *target_args(),
        *index_args,
        "-d",
        str(raw),
        "-r",
        str(raw / LOCK_NAME),
    ]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise WheelhouseError(
            "pip download failed:\n  " + "\n  ".join((p.stderr or p.stdout).strip().splitlines()[-10:])
        )
    if include_suite:
        p = subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--no-deps", *index_args, "-w", str(raw), str(root)],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if p.returncode != 0:
            raise WheelhouseError(
                "building the suite's wheel failed:\n  "
                + "\n  ".join((p.stderr or p.stdout).strip().splitlines()[-10:])
            )
    return sorted(raw.iterdir())


def build(
    arch: str,
    dest: Path,
    root: Path,
    max_bytes: int,
    strategy: str = "split",
    skip: tuple[str, ...] = (),
    index_args: tuple[str, ...] = (),
    include_suite: bool = True,
) -> Manifest:
    with tempfile.TemporaryDirectory(prefix="ks-wheels-") as tmp:
        download(arch, Path(tmp), root, skip, index_args, include_suite)
        return pack(Path(tmp), Path(dest), max_bytes, arch, strategy)


def install(wheelhouse: Path, python: str, root: Path, flat: Path | None = None) -> list[str]:
    """Rebuild the wheels and install them into `python`'s environment with no index: the pinned
    wheels exactly as they are (no resolution: a node's own torch may stand in for a skipped one),
    then the checkout itself, editable. Returns the commands run."""
    flat = flat or Path(tempfile.mkdtemp(prefix="ks-wheelhouse-flat-"))
    files = unpack(Path(wheelhouse), flat)
    wheels = [str(f) for f in files if f.suffix == ".whl" and not f.name.startswith(SUITE_PREFIX)]
    cmds = [
        [python, "-m", "pip", "install", "--no-index", "--no-deps", *wheels],
        [
            python,
            "-m",
            "pip",
            "install",
            "--no-index",
            "--find-links",
            str(flat),
            "--no-deps",
            "--no-build-isolation",
            "-e",
            str(root),
        ],
    ]
    for cmd in cmds:
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            raise WheelhouseError(
                f"{' '.join(cmd[:6])} ... failed:\n  " + "\n  ".join((p.stderr or p.stdout).strip().splitlines()[-10:])
            )
    return [" ".join(c[:6]) + " ..." for c in cmds]


PARENT_PTH = "_kernelseek_parent_site.pth"


def parent_site_dirs() -> list[str]:
    """The folders this interpreter imports installed packages from that a `venv
    --system-site-packages` made from it would not see: those of the venv it runs in (a GPU image's
    /opt/venv, where its torch lives; such a venv's system site is the base interpreter's). The user
    site stays out, as venvs keep it out."""
    import site

    dirs = site.getsitepackages() if sys.prefix != sys.base_prefix else []
    seen, out = set(), []
    for d in dirs:
        if d not in seen and Path(d).is_dir():
            seen.add(d)
            out.append(d)
    return out


def make_venv(path: Path) -> list[str]:
    """A venv at `path` that sees what this interpreter sees: its system site packages, and through a
    .pth file the folders of `parent_site_dirs()`, so a node's own CUDA torch stands in for the one the
    wheelhouse leaves out. Where ensurepip is missing (Ubuntu without python3-venv) the venv borrows
    the parent's pip the same way. Returns the folders linked in."""
    import venv

    try:
        venv.EnvBuilder(system_site_packages=True, with_pip=True).create(path)
    except subprocess.CalledProcessError:
        venv.EnvBuilder(system_site_packages=True, with_pip=False, clear=True).create(path)
    purelib = subprocess.run(
        [str(Path(path) / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    dirs = parent_site_dirs()
    pth = Path(purelib) / PARENT_PTH
    if dirs:
        pth.write_text("".join(d + "\n" for d in dirs))
    elif pth.exists():
        pth.unlink()
    return dirs


def main(argv: list[str] | None = None) -> int:
    """The node-side entry point (standard library only): check, unpack or install a wheelhouse."""
    ap = argparse.ArgumentParser(prog="wheelhouse.py", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("verify").add_argument("wheelhouse", type=Path)
    u = sub.add_parser("unpack")
    u.add_argument("wheelhouse", type=Path)
    u.add_argument("dest", type=Path)
    sub.add_parser("venv", help="a venv that sees this Python's packages, its own venv's included").add_argument(
        "path", type=Path
    )
    i = sub.add_parser("install")
    i.add_argument("wheelhouse", type=Path)
    i.add_argument("--python", required=True)
    i.add_argument("--root", type=Path, default=Path("."))
    a = ap.parse_args(argv)
    try:
        if a.cmd == "verify":
            problems = verify(a.wheelhouse)
            print("\n".join(problems) or f"{a.wheelhouse}: every part is present and matches its sha256")
            return exitcodes.FAIL if problems else exitcodes.OK
        if a.cmd == "venv":
            dirs = make_venv(a.path)
            print(
                f"{a.path}: a venv with the system site packages"
                + (f", and {', '.join(dirs)} through {PARENT_PTH}" if dirs else "")
            )
            return exitcodes.OK
        if a.cmd == "unpack":
            files = unpack(a.wheelhouse, a.dest)
            print(f"{len(files)} files rebuilt and checked in {a.dest}")
            return exitcodes.OK
        for c in install(a.wheelhouse, a.python, a.root):
            print(f"ran: {c}")
        return exitcodes.OK
    except WheelhouseError as e:
        print(f"wheelhouse: {e}", file=sys.stderr)
        return exitcodes.FAIL


if __name__ == "__main__":
    sys.exit(main())
