"""scripts/profile-beside.py: Nsight Compute on our kernel and on FA3, one scenario at a time. Without a
GPU: the commands it gives ncu and the row it makes of a real capture (tests/fixtures/)."""

import importlib.util
from pathlib import Path

from kernelseek_suite.profiling import ncu

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("profile_beside", ROOT / "scripts" / "profile-beside.py")
pb = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pb)


def test_our_kernel_is_profiled_in_its_range_and_fa3_by_its_name_on_a_later_launch():
    ours = pb.command("ncu", "d64-h32kv8-s8192", "k.cu", fa3=False)
    assert ours[ours.index("--nvtx-include") + 1] == "kernel:d64-h32kv8-s8192/"
    assert ours[-4:] == ["k.cu", "d64-h32kv8-s8192", "--reps", "1"] and "--baseline" not in ours
    fa3 = pb.command("ncu", "d64-h32kv8-s8192", "k.cu", fa3=True)
    assert "--nvtx-include" not in fa3 and fa3[fa3.index("-k") + 1] == "regex:device_kernel"
    assert fa3[fa3.index("--launch-skip") + 1] == "2" and fa3[fa3.index("--launch-count") + 1] == "1"
    assert fa3[-3:] == ["--time", "--baseline", "fa3"]
    metrics = ours[ours.index("--metrics") + 1].split(",")
    assert set(pb.PIPE_METRICS) <= set(metrics) and set(ncu.TENSOR_METRICS) <= set(metrics)
    assert "--metrics" not in pb.command("ncu", "d64-h32kv8-s8192", "k.cu", fa3=False, extra=False)


def test_a_row_reads_time_pipes_and_stalls_from_a_capture():
    text = (ROOT / "tests" / "fixtures" / "ncu_ref_d128_s4096.csv").read_text()
    head = (
        '"0","1060","python3.12","127.0.0.1","void attn_fwd_ref_kernel<128, 128>(ks_attn_params)","1","7",'
        '"(128, 1, 1)","(64, 16, 8)","0","9.0","Command line profiler metrics",'
    )
    extra = {
        pb.PIPE_METRICS[0]: ("%", "61.20"),
        pb.PIPE_METRICS[1]: ("%", "48.00"),
        ncu.TENSOR_METRICS[0]: ("%", "72.40"),
        ncu.STALL_METRIC.format("wait"): ("", "2.10"),
    }
    text += "".join(f'{head}"{m}","{u}","{v}",\n' for m, (u, v) in extra.items())
    row = pb.row_of("d128-h16kv16-s4096", "flash_fwd_sm90", ncu.parse(text)[0])
    assert row[:2] == ("d128-h16kv16-s4096", "flash_fwd_sm90")
    assert row[2].endswith(" ms") and row[3:6] == ("72%", "61%", "48%")
    assert row[6:8] == ("-", "-")  # not in the capture: said, not guessed
    assert "wait 2.10" in row[8]


def test_without_ncu_it_says_so_and_exits_3(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(pb.shutil, "which", lambda name: None)
    assert pb.main(["d64-h32kv8-s8192", "--out", str(tmp_path)]) == 3
    assert "ncu not found" in capsys.readouterr().err
