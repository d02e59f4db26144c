"""`make reproduce` on a GPU machine with an index installs the baselines the run measures
(suite/reproduce/baselines_install.py); without a GPU it tries nothing, and where pip cannot get them
the run goes on and reports them as not installed."""

from __future__ import annotations

import subprocess
import sys

from kernelseek_suite import config
from kernelseek_suite.reproduce import baselines_install as bi


def test_the_baselines_are_the_containers_pins_without_torch():
    assert bi.baseline_requirements("sm90") == [
        "fa3-fwd==0.0.3",
        "flash-attn-4==4.0.0b36",
        "nvidia-cutlass-dsl[cu13]==4.8.1",
    ]
    assert bi.baseline_requirements("sm100") == ["flash-attn-4==4.0.0b36", "nvidia-cutlass-dsl[cu13]==4.8.1"]
    assert bi.baseline_requirements("sm80") == []  # no container, nothing pinned


def test_without_a_gpu_nothing_is_tried():
    said, ran = [], []
    left = bi.install("sm90", say=said.append, gpu_missing=lambda arch: "no NVIDIA GPU found", run=ran.append)
    assert left == [] and ran == []
    assert "not installed (no NVIDIA GPU found)" in said[0]


def test_pip_gets_the_pins_into_the_runs_python():
    calls = []

    def run(cmd, **kw):
        calls.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, "", "")

    assert bi.install("sm90", python="/venv/bin/python", say=lambda s: None, gpu_missing=lambda a: None, run=run) == []
    assert calls[0][:4] == ["/venv/bin/python", "-m", "pip", "install"]
    assert calls[0][-3:] == bi.baseline_requirements("sm90") and not any(c.startswith("torch") for c in calls[0])


def test_an_unreachable_index_leaves_them_to_be_reported_not_installed():
    said = []
    left = bi.install(
        "sm90",
        python=sys.executable,
        say=said.append,
        gpu_missing=lambda arch: None,
        pip_args=("--index-url", "http://127.0.0.1:9/simple", "--retries", "0", "--timeout", "3"),
    )
    assert left == bi.baseline_requirements("sm90")
    assert "could not install" in said[-1] and "not installed" in said[-1] and "WHEELHOUSE" in said[-1]


def test_make_reproduce_installs_them_except_in_the_container():
    def dry(*extra):
        return subprocess.run(
            ["make", "-n", "reproduce", "ARCH=sm90", *extra], cwd=config.REPO_ROOT, capture_output=True, text=True
        ).stdout

    assert "kernelseek_suite.reproduce.baselines_install --arch sm90" in dry()
    assert "baselines_install" not in dry("RUNTIME=docker")
    assert "baselines_install" not in dry("WHEELHOUSE=/wh")  # the wheelhouse brings them
