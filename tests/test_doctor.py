import json

import docker
import pytest
from click.testing import CliRunner

from kernelseek_suite.cli import main
from kernelseek_suite.gpu import GPUInfo
from kernelseek_suite.reproduce import doctor
from test_containers import FakeClient


def h200(**kw):
    base = dict(
        index=0,
        name="NVIDIA H200",
        uuid="GPU-1",
        compute_capability=(9, 0),
        driver="580.159.04",
        sm_clock_mhz=1980,
        mem_clock_mhz=3201,
        max_sm_clock_mhz=1980,
        temperature_c=40,
        power_w=120.0,
        throttle_reasons=0x1,
        processes=0,
    )
    base.update(kw)
    return GPUInfo(**base)


def engine_down():
    raise docker.errors.DockerException(
        "Error while fetching server API version: ('Connection aborted.', "
        "FileNotFoundError(2, 'No such file or directory'))"
    )


def run(arch="sm90", runtime="native", gpus=None, client=None, nvcc="13.0.88", baselines=None, make_client=None):
    status = baselines or {"fa3": "ok", "fa4": "ok", "cudnn": "ok"}
    return doctor.diagnose(
        arch,
        runtime,
        gpus=[h200()] if gpus is None else gpus,
        make_client=make_client or ((lambda: client) if client else None),
        nvcc_version=lambda: nvcc,
        baseline_status=lambda names: {n: status.get(n, "ok") for n in names},
    )


def test_a_sound_machine_exits_0():
    rep = run()
    assert rep.exit_code == 0, [f for f in rep.findings if not f.ok]
    assert {f.check for f in rep.findings} >= {"gpu", "nvcc", "driver", "baselines", "gpu-busy", "throttle"}
    assert run(runtime="docker", client=FakeClient()).exit_code == 0


@pytest.mark.parametrize(
    "case, kwargs, code, words",
    [
        ("no GPU", dict(gpus=[]), 3, "no NVIDIA GPU"),
        (
            "sm120 is not sm100",
            dict(arch="sm100", gpus=[h200(name="RTX PRO 6000", compute_capability=(12, 0))]),
            3,
            "sm120",
        ),
        ("engine down", dict(runtime="docker", make_client=engine_down), 11, "systemctl start docker"),
        (
            "no nvidia runtime",
            dict(runtime="docker", client=FakeClient(info={"Runtimes": {"runc": {}}})),
            12,
            "nvidia-ctk runtime configure",
        ),
        (
            "old driver for the image",
            dict(runtime="docker", client=FakeClient(), gpus=[h200(driver="570.86.10")]),
            13,
            "580.65.06",
        ),
        ("old driver for nvcc", dict(gpus=[h200(driver="550.54.14")]), 13, "580.65.06"),
        ("busy", dict(gpus=[h200(processes=2)]), 14, "nvidia-smi"),
        ("throttled", dict(gpus=[h200(throttle_reasons=0x40 | 0x1)]), 15, "hardware thermal slowdown"),
        ("no nvcc", dict(nvcc=None), 16, "CUDA toolkit"),
        (
            "old nvcc for sm100",
            dict(arch="sm100", gpus=[h200(name="B200", compute_capability=(10, 0))], nvcc="12.4.1"),
            16,
            "12.8",
        ),
        (
            "main baseline missing",
            dict(baselines={"fa3": "not installed (ImportError): pip install fa3-fwd==0.0.3"}),
            17,
            "WHEELHOUSE",
        ),
        ("no NVML", dict(gpus=[h200(processes=None, throttle_reasons=None)]), 18, "nvidia-ml-py"),
    ],
)
def test_each_problem_has_its_code_and_a_fix(case, kwargs, code, words):
    rep = run(**kwargs)
    assert rep.exit_code == code, rep.to_dict()
    bad = [f for f in rep.findings if f.code == code]
    assert bad and all(f.fix for f in bad)
    assert any(words in f.fix or words in f.detail for f in bad), bad


def test_auto_notes_docker_and_checks_native():
    rep = run(runtime="auto", client=FakeClient(info={"Runtimes": {"runc": {}}}))
    assert rep.exit_code == 0
    assert any(f.check == "nvidia-runtime" and f.note_only for f in rep.findings)
    assert any(f.check == "nvcc" and f.ok for f in rep.findings)


def test_a_secondary_baseline_is_a_note():
    rep = run(baselines={"fa4": "not installed"})
    assert rep.exit_code == 0
    assert any(f.check == "baselines" and f.note_only and "fa4" in f.detail for f in rep.findings)


def test_doctor_cli_on_this_machine():
    """This machine (CI) has no GPU: the preflight says so with exit 3, in JSON too."""
    from kernelseek_suite.gpu import list_gpus

    if list_gpus():
        pytest.skip("a GPU is here")
    r = CliRunner().invoke(main, ["doctor", "--arch", "sm90", "--runtime", "native", "--json"])
    assert r.exit_code == 3
    d = json.loads(r.output)
    assert d["exit_code"] == 3 and d["findings"][0]["check"] == "gpu" and d["findings"][0]["fix"]
