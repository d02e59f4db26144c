"""Nsight Compute output, parsed: the `--csv --page details` form and the default text form both
become KernelProfile objects (metrics by section and name, and ncu's rule findings), which
`summarize` turns into the handful of numbers a kernel engineer looks at first, and `table` into
the compact text the tool-rich agent reads.

A metric that the report does not hold is None in the summary and "not reported" in the table:
nothing is estimated or filled in. `ncu_command` builds the command line the profiler tool runs.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import asdict, dataclass, field

from tabulate import tabulate

# what the profiler tool collects: the sections whose numbers the summary reads, plus raw metrics
# that no section prints in its details table (tensor pipes, stall reasons by cause)
SECTIONS = (
    "SpeedOfLight",
    "Occupancy",
    "LaunchStats",
    "WarpStateStats",
    "MemoryWorkloadAnalysis",
    "ComputeWorkloadAnalysis",
)
TENSOR_METRICS = (
    "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",  # all tensor work
    "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",  # wgmma (sm90)
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",  # mma.sync
)
STALL_REASONS = (
    "barrier",
    "branch_resolving",
    "dispatch_stall",
    "drain",
    "imc_miss",
    "lg_throttle",
    "long_scoreboard",
    "math_pipe_throttle",
    "membar",
    "mio_throttle",
    "misc",
    "no_instruction",
    "not_selected",
    "selected",
    "short_scoreboard",
    "sleeping",
    "tex_throttle",
    "wait",
)
STALL_METRIC = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"
STALL_METRICS = tuple(STALL_METRIC.format(r) for r in STALL_REASONS)
_STALL_RE = re.compile(r"^smsp__average_warps_issue_stalled_(\w+?)_per_issue_active\.ratio$")

NOT_REPORTED = "not reported"


def ncu_command(
    ncu: str,
    target: list[str],
    nvtx_range: str | None = None,
    kernel_regex: str | None = None,
    extra_metrics: bool = True,
    csv_details: bool = True,
) -> list[str]:
    """`ncu` on `target` (a command), with unlocked clocks, filtered to the kernels launched inside the
    push/pop NVTX range `nvtx_range` and/or whose name matches `kernel_regex`."""
    cmd = [ncu, "--clock-control", "none", "--target-processes", "all"]
    if nvtx_range:
        cmd += ["--nvtx", "--nvtx-include", f"{nvtx_range}/"]
    if kernel_regex:
        cmd += ["-k", f"regex:{kernel_regex}"]
    for s in SECTIONS:
        cmd += ["--section", s]
    if extra_metrics:
        cmd += ["--metrics", ",".join(TENSOR_METRICS + STALL_METRICS)]
    if csv_details:
        cmd += ["--csv", "--page", "details"]
    return cmd + list(target)


# ---------------------------------------------------------------- the report


@dataclass
class Metric:
    section: str
    name: str
    unit: str
    text: str  # as ncu printed it
    value: float | None  # the number in base units (bytes, seconds, hertz, %), None if not a number


@dataclass
class Finding:
    section: str
    rule: str
    kind: str  # OPT (an optimization opportunity), INF, WRN
    text: str
    speedup_pct: float | None = None


@dataclass
class KernelProfile:
    name: str
    grid: str | None = None
    block: str | None = None
    metrics: dict[tuple[str, str], Metric] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)

    def get(self, name: str, section: str | None = None) -> Metric | None:
        if section is not None:
            return self.metrics.get((section, name))
        return next((m for (s, n), m in self.metrics.items() if n == name), None)

    def value(self, names: tuple[str, ...] | str, section: str | None = None) -> float | None:
        for n in (names,) if isinstance(names, str) else names:
            m = self.get(n, section)
            if m is not None and m.value is not None:
                return m.value
        return None


_SCALE = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
_TIME = {"ns": 1e-9, "nsecond": 1e-9, "us": 1e-6, "usecond": 1e-6, "ms": 1e-3, "msecond": 1e-3, "s": 1.0, "second": 1.0}
_PREFIXED = re.compile(r"^([KMGT]?)(byte|hz|Hz|cycle|sector|inst|warp|block|thread|register)(.*)$", re.IGNORECASE)


def _number(text: str, unit: str) -> float | None:
    t = text.strip().replace(",", "")
    try:
        x = float(t)
    except ValueError:
        return None
    if unit in _TIME:
        return x * _TIME[unit]
    m = _PREFIXED.match(unit or "")
    if m and m.group(1):
        return x * _SCALE[m.group(1).upper()]
    return x


def _base_unit(unit: str) -> str:
    if unit in _TIME:
        return "s"
    m = _PREFIXED.match(unit or "")
    return (m.group(2).lower() + m.group(3)) if m else unit


def _add_metric(k: KernelProfile, section: str, name: str, unit: str, text: str) -> None:
    unit = unit or ""
    k.metrics[(section, name)] = Metric(section, name, _base_unit(unit), text, _number(text, unit))


_SPEEDUP_TEXT = re.compile(r"^Est\. (?:Local |Global )?Speedup: ([\d.]+)%\s*")


def _finding(section: str, rule: str, kind: str, text: str, speedup: str | None = None) -> Finding:
    text = " ".join(text.split())
    m = _SPEEDUP_TEXT.match(text)
    if m:
        speedup = speedup or m.group(1)
        text = text[m.end() :]
    try:
        sp = float(speedup) if speedup not in (None, "") else None
    except ValueError:
        sp = None
    return Finding(section, rule, kind, text, sp)


def parse_csv(text: str) -> list[KernelProfile]:
    """`ncu --csv --page details` output (ncu's own ==PROF== lines may be mixed in)."""
    lines = [l for l in text.splitlines() if l.strip() and not l.startswith("==")]
    start = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
    if start is None:
        return []
    kernels: dict[str, KernelProfile] = {}
    for row in csv.DictReader(io.StringIO("\n".join(lines[start:]))):
        kid = row.get("ID")
        if kid is None or kid == "ID":
            continue
        k = kernels.get(kid)
        if k is None:
            k = kernels[kid] = KernelProfile(row.get("Kernel Name") or "?", row.get("Grid Size"), row.get("Block Size"))
        section, name = row.get("Section Name") or "", row.get("Metric Name") or ""
        if row.get("Rule Name"):
            k.findings.append(
                _finding(
                    section,
                    row["Rule Name"],
                    row.get("Rule Type") or "",
                    row.get("Rule Description") or "",
                    row.get("Estimated Speedup"),
                )
            )
        elif name:
            _add_metric(k, section, name, row.get("Metric Unit") or "", row.get("Metric Value") or "")
    return list(kernels.values())


# "  void k<128>(ks_attn_params) (64, 16, 8)x(128, 1, 1), Context 1, Stream 7, Device 0, CC 9.0"; older
# versions print a date instead of the launch shape
_KERNEL_LINE = re.compile(
    r"^  (\S.*?\))(?: \((\d+, \d+, \d+)\)x\((\d+, \d+, \d+)\))?, (?:[^,]*, )?Context \d+, Stream \d+"
)
_SECTION_LINE = re.compile(r"^    Section: (.+?)\s*$")
_RULE_LINE = re.compile(r"^    (OPT|INF|WRN|ERR)\s{2,}(.*)$")
_DASHES = re.compile(r"-+")


def parse_text(text: str) -> list[KernelProfile]:
    """ncu's default (human-readable) output."""
    kernels: list[KernelProfile] = []
    k: KernelProfile | None = None
    section = ""
    spans: list[tuple[int, int]] | None = None
    in_table = False
    rule: list | None = None  # [kind, lines]

    def close_rule():
        nonlocal rule
        if rule and k is not None:
            k.findings.append(_finding(section, "", rule[0], " ".join(rule[1])))
        rule = None

    for line in text.splitlines():
        m = _KERNEL_LINE.match(line)
        if m:
            close_rule()
            k = KernelProfile(
                m.group(1), f"({m.group(2)})" if m.group(2) else None, f"({m.group(3)})" if m.group(3) else None
            )
            kernels.append(k)
            section, spans, in_table = "", None, False
            continue
        if k is None:
            continue
        m = _SECTION_LINE.match(line)
        if m:
            close_rule()
            section, spans, in_table = m.group(1), None, False
            continue
        stripped = line.strip()
        if stripped and set(stripped) <= {"-", " "} and stripped.startswith("-"):
            close_rule()
            if spans is None or not in_table:
                spans = [(mm.start(), mm.end()) for mm in _DASHES.finditer(line)]
            in_table = not in_table if len(spans) >= 2 else False
            continue
        m = _RULE_LINE.match(line)
        if m:
            close_rule()
            rule = [m.group(1), [m.group(2)]]
            continue
        if rule is not None:
            if line.startswith(" " * 10) and stripped:
                rule[1].append(stripped)
                continue
            close_rule()
        if spans and len(spans) >= 2 and stripped and not stripped.startswith("Metric Name"):
            cells = [line[a : b if i < len(spans) - 1 else None].strip() for i, (a, b) in enumerate(spans)]
            if len(cells) == 3:
                name, unit, value = cells
            else:  # no unit column (older ncu, --metrics only)
                name, unit, value = cells[0], "", cells[-1]
            if name:
                _add_metric(k, section, name, unit, value)
    close_rule()
    return kernels


def parse(text: str) -> list[KernelProfile]:
    """Either form: CSV when the text holds ncu's CSV header, else the text form."""
    return parse_csv(text) if re.search(r'^"ID","Process ID"', text, re.MULTILINE) else parse_text(text)


# ---------------------------------------------------------------- the summary

SOL = "GPU Speed Of Light Throughput"
MEM = "Memory Workload Analysis"


@dataclass
class Stall:
    reason: str
    cycles_per_issue: float
    share: float | None  # of all cycles between two issued instructions


@dataclass
class ProfileSummary:
    kernel: str
    grid: str | None
    block: str | None
    duration_s: float | None
    sm_throughput_pct: float | None
    tensor_pipe_pct: float | None
    tensor_pipe_metric: str | None
    dram_throughput_pct: float | None
    dram_bytes_per_s: float | None
    l2_throughput_pct: float | None
    l2_hit_pct: float | None
    l1_throughput_pct: float | None
    achieved_occupancy_pct: float | None
    theoretical_occupancy_pct: float | None
    occupancy_limiters: list[str]
    registers_per_thread: float | None
    smem_dynamic_bytes: float | None
    smem_static_bytes: float | None
    smem_driver_bytes: float | None
    spill_requests: float | None
    warp_cycles_per_issue: float | None
    stalls: list[Stall]
    findings: list[Finding]

    def to_dict(self) -> dict:
        return asdict(self)


_LIMITS = {
    "Block Limit Registers": "registers",
    "Block Limit Shared Mem": "shared memory",
    "Block Limit Warps": "warps",
    "Block Limit SM": "blocks per SM",
    "Block Limit Barriers": "barriers",
}


def summarize(k: KernelProfile) -> ProfileSummary:
    limits = {label: k.value(name, "Occupancy") for name, label in _LIMITS.items()}
    limits = {label: v for label, v in limits.items() if v is not None}
    low = min(limits.values()) if limits else None
    tensor = next(((m, k.value(m)) for m in TENSOR_METRICS if k.value(m) is not None), (None, None))
    per_issue = k.value("Warp Cycles Per Issued Instruction")
    stalls = []
    for (_section, name), m in k.metrics.items():
        r = _STALL_RE.match(name)
        if r and m.value is not None and r.group(1) != "selected":
            stalls.append(Stall(r.group(1), m.value, m.value / per_issue if per_issue else None))
    stalls.sort(key=lambda x: -x.cycles_per_issue)
    opts = sorted((f for f in k.findings if f.kind == "OPT"), key=lambda f: -(f.speedup_pct or 0.0))
    return ProfileSummary(
        kernel=k.name,
        grid=k.grid,
        block=k.block,
        duration_s=k.value("Duration", SOL),
        sm_throughput_pct=k.value(("Compute (SM) Throughput", "SM [%]"), SOL),
        tensor_pipe_pct=tensor[1],
        tensor_pipe_metric=tensor[0],
        dram_throughput_pct=k.value("DRAM Throughput", SOL),
        dram_bytes_per_s=_rate(k.get("Memory Throughput", MEM)),
        l2_throughput_pct=k.value("L2 Cache Throughput", SOL),
        l2_hit_pct=k.value("L2 Hit Rate", MEM),
        l1_throughput_pct=k.value("L1/TEX Cache Throughput", SOL),
        achieved_occupancy_pct=k.value("Achieved Occupancy", "Occupancy"),
        theoretical_occupancy_pct=k.value("Theoretical Occupancy", "Occupancy"),
        occupancy_limiters=[label for label, v in limits.items() if v == low],
        registers_per_thread=k.value("Registers Per Thread"),
        smem_dynamic_bytes=k.value("Dynamic Shared Memory Per Block"),
        smem_static_bytes=k.value("Static Shared Memory Per Block"),
        smem_driver_bytes=k.value("Driver Shared Memory Per Block"),
        spill_requests=k.value("Local Memory Spilling Requests"),
        warp_cycles_per_issue=per_issue,
        stalls=stalls[:4],
        findings=opts[:3],
    )


def _rate(m: Metric | None) -> float | None:
    """A throughput in bytes per second (ncu prints it as byte/s with a prefix, e.g. Gbyte/s)."""
    if m is None or m.value is None or not m.unit.startswith("byte/s"):
        return None
    return m.value


# ---------------------------------------------------------------- the compact table


def _pct(x: float | None) -> str:
    return NOT_REPORTED if x is None else f"{x:.1f} %"


def _bytes(x: float | None) -> str:
    if x is None:
        return NOT_REPORTED
    return f"{x / 1000:.1f} KB" if x >= 1000 else f"{x:.0f} B"  # decimal, as ncu prints it


def _duration(x: float | None) -> str:
    if x is None:
        return NOT_REPORTED
    return f"{x * 1e3:.3f} ms" if x >= 1e-3 else f"{x * 1e6:.1f} us"


def table(s: ProfileSummary, finding_chars: int = 300) -> str:
    """What the model reads for one kernel."""
    dram = _pct(s.dram_throughput_pct)
    if s.dram_bytes_per_s is not None and s.dram_throughput_pct is not None:
        dram += f" ({s.dram_bytes_per_s / 1e9:.1f} GB/s)"
    l2 = _pct(s.l2_throughput_pct) + (f" (hit rate {s.l2_hit_pct:.1f} %)" if s.l2_hit_pct is not None else "")
    occ = _pct(s.achieved_occupancy_pct)
    if s.theoretical_occupancy_pct is not None:
        occ += f" (theoretical {s.theoretical_occupancy_pct:.1f} %"
        occ += f", limited by {', '.join(s.occupancy_limiters)})" if s.occupancy_limiters else ")"
    if s.smem_dynamic_bytes is None and s.smem_static_bytes is None:
        smem = NOT_REPORTED
    else:
        smem = f"{_bytes(s.smem_dynamic_bytes)} dynamic + {_bytes(s.smem_static_bytes)} static"
        if s.smem_driver_bytes:
            smem += f" (+{_bytes(s.smem_driver_bytes)} reserved by the driver)"
    tensor = _pct(s.tensor_pipe_pct) + (f" ({s.tensor_pipe_metric.split('.')[0]})" if s.tensor_pipe_metric else "")
    if s.stalls:
        stalls = "; ".join(
            f"{x.reason} {x.cycles_per_issue:.2f}" + (f" ({x.share * 100:.0f} %)" if x.share else "") for x in s.stalls
        )
        stalls += " cycles per issued instruction"
    else:
        stalls = NOT_REPORTED
    rows = [
        ("duration", _duration(s.duration_s)),
        ("SM throughput", _pct(s.sm_throughput_pct) + " of peak"),
        ("tensor pipe", tensor),
        ("DRAM throughput", dram),
        ("L2 throughput", l2),
        ("L1/TEX throughput", _pct(s.l1_throughput_pct)),
        ("achieved occupancy", occ),
        ("registers per thread", NOT_REPORTED if s.registers_per_thread is None else f"{s.registers_per_thread:.0f}"),
        ("shared memory per block", smem),
        ("spills (local memory requests)", NOT_REPORTED if s.spill_requests is None else f"{s.spill_requests:.0f}"),
        (
            "warp cycles per issued instruction",
            NOT_REPORTED if s.warp_cycles_per_issue is None else f"{s.warp_cycles_per_issue:.2f}",
        ),
        ("top warp stalls", stalls),
    ]
    head = f"kernel {s.kernel}" + (f"  grid {s.grid} block {s.block}" if s.grid else "")
    lines = [head, tabulate(rows, tablefmt="plain")]
    for f in s.findings:
        sp = f" (est. speedup {f.speedup_pct:.0f} %)" if f.speedup_pct is not None else ""
        text = f.text if len(f.text) <= finding_chars else f.text[:finding_chars].rsplit(" ", 1)[0] + " ..."
        lines.append(f"ncu finding{sp}: {text}")
    return "\n".join(lines)
