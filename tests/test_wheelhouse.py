import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from kernelseek_suite import config
from kernelseek_suite.reproduce import wheelhouse as wh

SCRIPT = config.REPO_ROOT / "suite" / "reproduce" / "wheelhouse.py"


def make_wheel(folder: Path, name: str, version: str, payload: bytes, compression=zipfile.ZIP_DEFLATED) -> Path:
    """A small installable wheel whose module holds `payload` (random bytes do not compress)."""
    dist = f"{name}-{version}.dist-info"
    path = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", compression) as z:
        z.writestr(f"{name}/__init__.py", f"VERSION = {version!r}\n")
        z.writestr(f"{name}/blob.bin", payload)
        z.writestr(f"{dist}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        z.writestr(f"{dist}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{dist}/RECORD", "")
    return path


@pytest.fixture
def wheels(tmp_path):
    src = tmp_path / "wheels"
    src.mkdir()
    make_wheel(src, "tinypkg", "1.0", b"x" * 100)
    make_wheel(src, "bigrandom", "2.0", os.urandom(9000))  # must be split
    # stored uncompressed, as much of a wheel's compiled code effectively is: xz brings it under the limit
    make_wheel(src, "bigzeros", "3.0", os.urandom(500) + b"\0" * 60000, zipfile.ZIP_STORED)
    return src


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def test_split_pack_manifest_and_unpack(tmp_path, wheels):
    limit = 4096
    m = wh.pack(wheels, tmp_path / "house", limit, "sm90", "split")
    stored = [p for p in (tmp_path / "house").iterdir() if p.name != wh.MANIFEST]
    assert stored and all(p.stat().st_size <= limit for p in stored)
    by = {e.name: e for e in m.files}
    big = by["bigrandom-2.0-py3-none-any.whl"]
    assert big.encoding == "raw" and len(big.parts) == -(-big.size // limit)
    assert [p.name for p in big.parts][:2] == [big.name + ".part000", big.name + ".part001"]
    assert sum(p.size for p in big.parts) == big.size
    assert len(by["tinypkg-1.0-py3-none-any.whl"].parts) == 1
    # the manifest on disk says the same
    again = wh.read_manifest(tmp_path / "house")
    assert again == m and json.loads((tmp_path / "house" / wh.MANIFEST).read_text())["max_bytes"] == limit
    assert wh.verify(tmp_path / "house") == []
    out = wh.unpack(tmp_path / "house", tmp_path / "flat")
    assert sorted(p.name for p in out) == sorted(p.name for p in wheels.iterdir())
    for p in out:
        assert _sha(p) == _sha(wheels / p.name)


def test_xz_repack_gets_under_the_limit_without_parts(tmp_path, wheels):
    m = wh.pack(wheels, tmp_path / "house", 8192, "sm90", "xz")
    z = {e.name: e for e in m.files}["bigzeros-3.0-py3-none-any.whl"]
    assert z.encoding == "xz" and len(z.parts) == 1 and z.parts[0].name.endswith(".whl.xz")
    r = {e.name: e for e in m.files}["bigrandom-2.0-py3-none-any.whl"]
    assert len(r.parts) == 2  # random data does not compress: still over the limit, so split
    for p in wh.unpack(tmp_path / "house", tmp_path / "flat"):
        assert _sha(p) == _sha(wheels / p.name)


def test_damage_is_found_before_anything_is_rebuilt(tmp_path, wheels):
    wh.pack(wheels, tmp_path / "house", 4096, "sm90")
    part = tmp_path / "house" / "bigrandom-2.0-py3-none-any.whl.part001"
    data = bytearray(part.read_bytes())
    data[10] ^= 0xFF
    part.write_bytes(bytes(data))
    (tmp_path / "house" / "tinypkg-1.0-py3-none-any.whl").unlink()
    problems = wh.verify(tmp_path / "house")
    assert any("part001 does not match its sha256" in p for p in problems)
    assert any("tinypkg-1.0-py3-none-any.whl (part of tinypkg-1.0-py3-none-any.whl) is missing" in p for p in problems)
    with pytest.raises(wh.WheelhouseError, match="not sound"):
        wh.unpack(tmp_path / "house", tmp_path / "flat")
    assert not (tmp_path / "flat").exists()


def test_download_from_the_lock_pack_and_install_offline(tmp_path, wheels):
    """The whole path with no network: pip downloads the lock's pins (hashes checked) from a local
    folder, the wheelhouse is packed, checked by the stdlib-only script, rebuilt and installed."""
    root = tmp_path / "repo"
    (root / "containers" / "sm90").mkdir(parents=True)
    lock = "".join(
        f"{p.name.split('-')[0]}=={p.name.split('-')[1]} \\\n    --hash=sha256:{_sha(p)}\n"
        for p in sorted(wheels.iterdir())
    )
    (root / "containers" / "sm90" / "requirements.lock").write_text(lock)
    m = wh.build(
        "sm90",
        tmp_path / "house",
        root,
        4096,
        "split",
        skip=("bigzeros",),
        index_args=("--no-index", "--find-links", str(wheels)),
        include_suite=False,
    )
    names = {e.name for e in m.files}
    assert names == {"tinypkg-1.0-py3-none-any.whl", "bigrandom-2.0-py3-none-any.whl", wh.LOCK_NAME}
    # the node side: the script runs on the standard library alone (-S: no site-packages)
    p = subprocess.run(
        [sys.executable, "-S", str(SCRIPT), "unpack", str(tmp_path / "house"), str(tmp_path / "flat")],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 0, p.stderr
    assert "3 files rebuilt and checked" in p.stdout
    target = tmp_path / "site"
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-index",
            "--no-deps",
            "--target",
            str(target),
            *map(str, sorted((tmp_path / "flat").glob("*.whl"))),
        ],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 0, p.stderr
    p = subprocess.run(
        [sys.executable, "-c", "import bigrandom, tinypkg; print(bigrandom.VERSION, tinypkg.VERSION)"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(target)},
    )
    assert p.stdout.split() == ["2.0", "1.0"]


def test_a_lock_pin_with_a_wrong_hash_is_refused(tmp_path, wheels):
    root = tmp_path / "repo"
    (root / "containers" / "sm90").mkdir(parents=True)
    (root / "containers" / "sm90" / "requirements.lock").write_text(f"tinypkg==1.0 \\\n    --hash=sha256:{'0' * 64}\n")
    with pytest.raises(wh.WheelhouseError, match="pip download failed"):
        wh.download(
            "sm90", tmp_path / "raw", root, index_args=("--no-index", "--find-links", str(wheels)), include_suite=False
        )


def test_the_nodes_venv_sees_the_packages_of_the_venv_python_runs_in(tmp_path):
    # GPU images often run python3 from a venv (/opt/venv) that holds their CUDA torch; a venv made with
    # --system-site-packages from it sees only the base interpreter's packages, so the node's torch was
    # lost. `wheelhouse.py venv` links the parent venv's folders in. Here the parent is a venv of our
    # own holding a marker module (the node's torch), so the test does not depend on where the tests'
    # own packages are installed.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    parent = tmp_path / "image-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(parent)], check=True, env=env)
    py = str(parent / "bin" / "python")
    purelib = subprocess.run(
        [py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout.strip()
    (Path(purelib) / "ks_node_marker.py").write_text("WHERE = 'the image venv'\n")
    probe = "import ks_node_marker, sys; print(ks_node_marker.__file__); print(sys.prefix)"

    # what was there before: the plain venv does not see the parent venv's packages
    plain = tmp_path / "plain"
    subprocess.run([py, "-m", "venv", "--without-pip", "--system-site-packages", str(plain)], check=True, env=env)
    assert subprocess.run([str(plain / "bin" / "python"), "-c", probe], capture_output=True, env=env).returncode != 0

    made = tmp_path / "node-venv"
    p = subprocess.run([py, str(Path(wh.__file__)), "venv", str(made)], capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    assert wh.PARENT_PTH in p.stdout and purelib in p.stdout
    seen = subprocess.run([str(made / "bin" / "python"), "-c", probe], capture_output=True, text=True, env=env)
    assert seen.returncode == 0, seen.stderr
    where, prefix = seen.stdout.split()
    assert Path(where).parent == Path(purelib) and Path(prefix) == made
