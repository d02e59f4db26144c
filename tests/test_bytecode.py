"""The shared bytecode cache (harness/bytecode.py): when it is set, and that it works for children."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelseek_suite.harness import bytecode


@pytest.fixture
def package(tmp_path, monkeypatch):
    """A package without bytecode, importable from tmp_path/site."""
    site = tmp_path / "site"
    pkg = site / "ks_probe_pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("VALUE = 41 + 1\n")
    monkeypatch.syspath_prepend(str(site))
    return pkg


def test_a_package_whose_folder_cannot_be_written_lacks_bytecode(package):
    assert bytecode.lacks_bytecode("ks_probe_pkg", writable=lambda folder: False)


def test_a_writable_folder_or_present_bytecode_or_no_package_is_left_alone(package):
    assert not bytecode.lacks_bytecode("ks_probe_pkg", writable=lambda folder: True)
    cache = package / "__pycache__"
    cache.mkdir()
    pyc = Path(importlib.util.cache_from_source(str(package / "__init__.py")))
    pyc.write_bytes(b"")
    assert not bytecode.lacks_bytecode("ks_probe_pkg", writable=lambda folder: False)
    assert not bytecode.lacks_bytecode("ks_no_such_package_here", writable=lambda folder: False)


def test_the_prefix_is_set_only_where_bytecode_is_missing(package, tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELSEEK_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(bytecode.os, "access", lambda folder, mode: False)
    env: dict[str, str] = {}
    folder = bytecode.share_bytecode(env, package="ks_probe_pkg")
    assert folder == str(tmp_path / "cache" / "pycache") and env == {bytecode.ENV: folder}
    assert Path(folder).is_dir()
    # the user's own setting, or no bytecode at all, wins
    assert bytecode.share_bytecode({bytecode.ENV: "/elsewhere"}, package="ks_probe_pkg") is None
    assert bytecode.share_bytecode({"PYTHONDONTWRITEBYTECODE": "1"}, package="ks_probe_pkg") is None
    monkeypatch.setattr(bytecode.os, "access", lambda folder, mode: True)
    assert bytecode.share_bytecode({}, package="ks_probe_pkg") is None


def test_a_child_with_the_prefix_writes_bytecode_that_the_next_one_reads(package, tmp_path):
    prefix = tmp_path / "prefix"
    env = {**os.environ, "PYTHONPATH": str(package.parent), bytecode.ENV: str(prefix)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    code = "import ks_probe_pkg, sys; print(ks_probe_pkg.VALUE, ks_probe_pkg.__cached__)"
    first = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    value, cached = first.stdout.split()
    assert value == "42" and Path(cached).is_file() and Path(cached).is_relative_to(prefix)
    assert not (package / "__pycache__").exists()  # nothing written beside the source
    stamp = Path(cached).stat().st_mtime_ns
    second = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert second.stdout.split() == [value, cached] and Path(cached).stat().st_mtime_ns == stamp
