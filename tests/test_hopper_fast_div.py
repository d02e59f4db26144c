"""The Hopper kernel's scheduler divides tile indices by launch-time values with a multiply and a shift
(`FastDiv`, `fast_div`, `fast_quot` and its high-word form `fast_quot32` in kernels/hopper/flash_fwd_sm90.cu). The file's own code, cut out
and compiled for the host, must give the quotient of every division the scheduler can ask for: here
every divisor up to 4096 with the dividends around each multiple, powers of two and their neighbours up
to 2^31 - 1, and random pairs."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

KERNEL = Path(__file__).resolve().parents[1] / "kernels" / "hopper" / "flash_fwd_sm90.cu"

CHECK = r"""
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>
%s
static long long bad = 0, checked = 0;
static void check(long long n, int d, const FastDiv& f) {
  if (n < 0 || n > 0x7fffffffLL) return;
  ++checked;
  if (fast_quot((int)n, f) != (int)(n / d)) {
    if (bad++ < 5) std::printf("wrong: %%lld / %%d\n", n, d);
  }
  if (fast_quot32((int)n, f) != (int)(n / d)) {
    if (bad++ < 5) std::printf("wrong (high word): %%lld / %%d\n", n, d);
  }
}
int main() {
  std::mt19937_64 rng(12345);
  std::vector<int> divisors;
  for (int d = 1; d <= 4096; ++d) divisors.push_back(d);
  for (int k = 12; k <= 30; ++k) {
    divisors.push_back(1 << k);
    divisors.push_back((1 << k) - 1);
    divisors.push_back((1 << k) + 1);
  }
  divisors.push_back(0x7fffffff);
  for (int i = 0; i < 2000; ++i) divisors.push_back((int)(rng() %% 0x7fffffffULL) + 1);
  for (int d : divisors) {
    const FastDiv f = fast_div(d);
    if (f.d != d) { std::printf("divisor kept wrong: %%d\n", d); return 1; }
    const long long top = 0x7fffffffLL;
    for (long long q : {0LL, 1LL, 2LL, 3LL, 1000LL, top / d - 1, top / d})
      for (long long r : {-1LL, 0LL, 1LL, (long long)d - 1})
        check(q * d + r, d, f);
    for (int k = 0; k <= 31; ++k)
      for (long long e : {-1LL, 0LL, 1LL}) check((1LL << k) + e, d, f);
    for (int i = 0; i < 64; ++i) check((long long)(rng() %% 0x80000000ULL), d, f);
  }
  std::printf("checked %%lld, wrong %%lld\n", checked, bad);
  return bad == 0 ? 0 : 1;
}
"""


def _fast_div_source() -> str:
    text = KERNEL.read_text()
    start = text.index("struct FastDiv {")
    end = text.index("struct DeviceParams {")
    code = text[start:end]
    assert "fast_div(int d)" in code and "fast_quot(int n" in code and "fast_quot32(int n" in code
    return code


def _run_check(tmp_path, code: str, name: str) -> subprocess.CompletedProcess:
    """The check program around `code`, compiled for the host with nvcc and run."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("needs nvcc")
    src = tmp_path / f"{name}.cu"
    src.write_text(CHECK % code)
    exe = tmp_path / name
    subprocess.run([nvcc, "-std=c++17", "-O2", "-o", str(exe), str(src)], check=True, capture_output=True, text=True)
    return subprocess.run([str(exe)], capture_output=True, text=True)


def test_the_kernels_fast_division_gives_every_quotient(tmp_path):
    out = _run_check(tmp_path, _fast_div_source(), "fast_div")
    assert out.returncode == 0, out.stdout + out.stderr
    checked = int(re.search(r"checked (\d+)", out.stdout).group(1))
    assert checked > 1_000_000


def test_a_wrong_multiplier_is_caught(tmp_path):
    """The check itself: the same code with the multiplier rounded down instead of up must fail."""
    code = _fast_div_source()
    broken = code.replace("+ (unsigned long long)d - 1) / (unsigned long long)d", ") / (unsigned long long)d")
    assert broken != code
    out = _run_check(tmp_path, broken, "fast_div_broken")
    assert out.returncode == 1 and "wrong:" in out.stdout


def test_a_wrong_shift_in_the_high_word_form_is_caught(tmp_path):
    """The high-word form's shift one bit too far (s instead of s - 1) must fail, and only that form."""
    code = _fast_div_source()
    broken = code.replace(">> (f.s - 1)", ">> f.s")
    assert broken != code
    out = _run_check(tmp_path, broken, "fast_div_shift")
    assert out.returncode == 1 and "wrong (high word):" in out.stdout and "wrong:" not in out.stdout
