"""Containment helpers: the memory the parent polls, and the paths a sandbox must not write."""

import os
import stat

import pytest

from kernelseek_suite import config
from kernelseek_suite.containment import protected_paths, rss_bytes, writable


def test_rss_of_this_process():
    r = rss_bytes(os.getpid())
    assert r is not None and r > 10 << 20
    assert rss_bytes(2**22 + 12345) is None


def test_protected_paths_are_the_harness_the_reference_and_the_results(tmp_path):
    paths = protected_paths(config.REPO_ROOT, tmp_path)
    names = {p.name for p in paths}
    assert {"suite", "reference"} <= names and tmp_path in paths


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anything")
def test_writable_finds_what_a_sandbox_could_change(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    (ro / "f.txt").write_text("x")
    (ro / "f.txt").chmod(stat.S_IRUSR)
    ro.chmod(stat.S_IRUSR | stat.S_IXUSR)
    rw = tmp_path / "rw"
    rw.mkdir()
    try:
        assert writable([ro, rw]) == [rw]
    finally:
        ro.chmod(stat.S_IRWXU)
