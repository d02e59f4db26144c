"""The reproduction's commands: `reproduce`, `doctor`, `wheelhouse`, `render`, `verify` and
`container` (pin, lock, check). A thin layer over suite/reproduce and suite/reports."""

from __future__ import annotations

import json
import sys

import click
from tabulate import tabulate

from .. import config
from ..contracts.exitcodes import FAIL, OK, USAGE
from .common import EXISTING_FOLDER, FOLDER, fail, run_with_progress, say
from .scaleout import make_executor, scaleout_options

ARCH = click.Choice(sorted(config.REPRODUCE))


@click.command("reproduce")
@click.option("--arch", type=ARCH, default="sm90", show_default=True)
@click.option(
    "--runtime",
    type=click.Choice(["auto", "docker", "native"]),
    default="auto",
    show_default=True,
    help="auto: the container where Docker can give it a GPU, else natively",
)
@click.option(
    "--out",
    type=FOLDER,
    default=None,
    help="default: results/<arch>; without the GPU, build/reproduce/<arch>",
)
@click.option("--gpu", "gpu_index", type=int, default=0, show_default=True)
@click.option("--seed", type=int, default=None)
@click.option("--scenarios", "pattern", default=None, help="a glob filter, for a quick partial sweep")
@click.option("--no-extended", is_flag=True, help="skip the extended correctness set")
@click.option("--rebuild-image", is_flag=True, help="build the image even if this checkout's exists")
@click.option("--resume", is_flag=True, help="continue an interrupted run in --out (measured rows are kept)")
@click.option(
    "--root",
    type=EXISTING_FOLDER,
    default=None,
    help="the checkout (default: the one the suite runs from)",
)
@scaleout_options
def reproduce_cmd(arch, runtime, out, gpu_index, seed, pattern, no_extended, rebuild_image, resume, root, scaleout):
    """Regenerate results/<arch>/ end to end: GEMM ceiling, the 182 scenarios and the extended set
    beside the baselines, the head-to-head where traces exist, and REPORT.md with plots and tables.

    Without the right GPU it says what is missing, runs the static checks of every architecture's
    kernels, renders the shipped results marked "shipped, not re-measured", and exits 3 (2 when a
    kernel fails its static checks)."""
    from ..reproduce.pipeline import ReproduceRequest, reproduce

    if scaleout is not None and (runtime == "docker" or scaleout.per_class_reports):
        fail(
            "reproduce on a Dask cluster runs natively, on one GPU class (no --runtime docker, no --per-class-reports)",
            USAGE,
        )
    req = ReproduceRequest(
        arch=arch,
        runtime=runtime,
        root=(root or config.REPO_ROOT).resolve(),
        out=out,
        gpu_index=gpu_index,
        seed=seed,
        scenario_filter=pattern,
        extended=not no_extended,
        rebuild_image=rebuild_image,
        resume=resume,
        executor=make_executor(scaleout),
    )
    outcome = run_with_progress(lambda **kw: reproduce(req, say, **kw), f"reproduce {arch}")
    for m in outcome.messages:
        click.echo(m)
    if outcome.summary:
        from ..report import summary_lines

        for line in summary_lines(outcome.summary):
            click.echo(line)
    what = {"partial": "partial run, nothing measured (no suitable GPU)"}.get(outcome.status, outcome.status)
    click.echo(f"reproduce {arch}: {what}; runtime {outcome.runtime}; exit {outcome.exit_code}")
    sys.exit(outcome.exit_code)


@click.command("doctor")
@click.option("--arch", type=ARCH, default="sm90", show_default=True)
@click.option("--runtime", type=click.Choice(["auto", "docker", "native"]), default="auto", show_default=True)
@click.option("--gpu", "gpu_index", type=int, default=0, show_default=True)
@click.option("--json", "as_json", is_flag=True)
def doctor_cmd(arch, runtime, gpu_index, as_json):
    """Preflight for `reproduce`: each problem with its fix and its own exit code (see
    `kernelseek_suite.reproduce.doctor`)."""
    from ..reproduce.doctor import diagnose

    rep = diagnose(arch, runtime, gpu_index)
    if as_json:
        click.echo(json.dumps(rep.to_dict(), indent=1))
    else:
        rows = [[f.state, f.check, f.detail, "" if f.ok or f.skipped else f.fix] for f in rep.findings]
        click.echo(
            tabulate(rows, headers=["", "check", "state", "fix"], tablefmt="simple", maxcolwidths=[None, None, 60, 70])
        )
        click.echo(f"doctor {arch} ({runtime}): exit {rep.exit_code}")
    sys.exit(rep.exit_code)


@click.command("wheelhouse")
@click.argument("dest", type=FOLDER)
@click.option("--arch", type=ARCH, default="sm90", show_default=True)
@click.option("--max-mb", type=float, default=60, show_default=True, help="no stored file is larger")
@click.option("--pack", "strategy", type=click.Choice(["split", "xz"]), default="split", show_default=True)
@click.option("--skip", multiple=True, help="glob of project names to leave out (e.g. torch, 'nvidia-*')")
@click.option("--no-suite", is_flag=True, help="do not build the suite's own wheel")
def wheelhouse_cmd(dest, arch, max_mb, strategy, skip, no_suite):
    """Download the architecture's pinned wheels and the suite into DEST for a node with no
    internet, no file larger than --max-mb; install there with `make reproduce WHEELHOUSE=DEST`."""
    from ..reproduce.wheelhouse import WheelhouseError, build

    try:
        m = build(arch, dest, config.REPO_ROOT, int(max_mb * 1e6), strategy, tuple(skip), include_suite=not no_suite)
    except WheelhouseError as e:
        fail(str(e), FAIL)
    parts = sum(len(e.parts) for e in m.files)
    total = sum(e.size for e in m.files)
    click.echo(
        f"{len(m.files)} files ({total / 1e9:.2f} GB) stored as {parts} parts of at most {max_mb:g} MB "
        f"in {dest}; manifest: {dest / 'manifest.json'}"
    )


@click.command("render")
@click.argument("results", type=EXISTING_FOLDER)
@click.option("--out", type=FOLDER, default=None)
@click.option(
    "--html", is_flag=True, help="also REPORT.html: one self-contained page (heat maps with hover, a sortable table)"
)
def render_cmd(results, out, html):
    """Regenerate REPORT.md, tables/ (CSV, LaTeX) and plots/ of RESULTS from its raw data (and REPORT.html)."""
    from ..reports import render
    from ..reports.data import NoResults

    try:
        r = render(results, out, html=html)
    except NoResults as e:
        fail(str(e), USAGE)
    click.echo(f"report: {r.report} ({len(r.tables)} table files, {len(r.plots)} plots)")
    if r.html:
        click.echo(f"page: {r.html}")
    elif html:
        say("REPORT.html not written: its colours need matplotlib (pip install 'kernelseek-suite[report]')")


@click.command("verify")
@click.argument("shipped", type=EXISTING_FOLDER)
@click.option(
    "--against",
    "fresh",
    type=EXISTING_FOLDER,
    required=True,
    help="the fresh run: a results/<arch> folder or a bench output folder",
)
@click.option("--baseline", default=None, help="default: the architecture's (fa3 on sm90, fa4 on sm100)")
@click.option("--tolerance", type=float, default=config.VERIFY_TOLERANCE, show_default=True)
@click.option("--all", "show_all", is_flag=True, help="list every scenario, not only those that changed")
@click.option("--json", "as_json", is_flag=True, help="the verdict as one JSON object: claims, every scenario, counts")
def verify_cmd(shipped, fresh, baseline, tolerance, show_all, as_json):
    """Compare a fresh run with the shipped results, scenario by scenario: same, faster, slower or
    inconclusive; then one line per claim. Exit 1 when a claim is not reproduced."""
    from ..reports.data import NoResults
    from ..reports.verify import SAME, compare

    try:
        v = compare(shipped, fresh, baseline, tolerance)
    except NoResults as e:
        fail(str(e), USAGE, {"reproduced": None, "error": str(e)} if as_json else None)
    if as_json:
        click.echo(json.dumps(v.to_dict()))
        sys.exit(OK if v.reproduced else FAIL)
    rows = [
        [s.scenario, _r(s.shipped), _r(s.fresh), f"{s.change:+.1%}" if s.change is not None else "", s.verdict, s.why]
        for s in v.scenarios
        if show_all or s.verdict != SAME
    ]
    for w in v.warnings:
        click.echo(f"warning: {w}", err=True)
    click.echo(f"ratio vs {v.baseline} (baseline time / kernel time), tolerance {v.tolerance:.0%}")
    if rows:
        click.echo(tabulate(rows, headers=["scenario", "shipped", "fresh", "change", "verdict", "why"]))
    click.echo("scenarios: " + ", ".join(f"{n} {k}" for k, n in v.counts().items()))
    for c in v.claims:
        click.echo(f"claim: {c.claim}: shipped {c.shipped}, fresh {c.fresh}: {c.verdict}")
    sys.exit(OK if v.reproduced else FAIL)


def _r(x):
    return "" if x is None else f"{x:.3f}"


@click.group("container")
def container_group():
    """The pinned images: base-image digests, the Python lock, and their checks."""


@container_group.command("pin")
@click.option("--arch", "arches", type=ARCH, multiple=True, help="default: every architecture")
def pin_cmd(arches):
    """Fill in or refresh each Dockerfile's base-image digest from its tag (NVIDIA removes old tags:
    keep a built image with `docker save` or in a registry you control)."""
    from ..reproduce.containers import dockerfile, pin
    from ..reproduce.registry import RegistryError, resolve_digest

    def resolve(ref: str) -> str:
        try:
            from ..reproduce.containers import client

            return client().images.get_registry_data(ref).id
        except Exception:  # no engine here: ask the registry directly
            return resolve_digest(ref)

    failed = False
    for arch in arches or sorted(config.REPRODUCE):
        try:
            changes = pin(dockerfile(arch), resolve)
        except RegistryError as e:
            click.echo(f"{arch}: {e}", err=True)
            failed = True
            continue
        for old, new in changes:
            click.echo(f"{arch}: {old} -> {new}")
        if not changes:
            click.echo(f"{arch}: digests current")
    sys.exit(FAIL if failed else OK)


@container_group.command("lock")
@click.option("--arch", "arches", type=ARCH, multiple=True, help="default: every architecture")
def lock_cmd(arches):
    """Resolve containers/<arch>/requirements.in and the suite's dependencies into requirements.lock."""
    from ..reproduce.lock import LockError, lock

    for arch in arches or sorted(config.REPRODUCE):
        try:
            click.echo(f"{arch}: wrote {lock(arch)}")
        except LockError as e:
            fail(f"{arch}: {e}", FAIL)


@container_group.command("check")
@click.option("--resolve", is_flag=True, help="also resolve each lock against the index (needs PyPI)")
def check_cmd(resolve):
    """Every FROM pinned by digest, labels matching the lock, and (--resolve) each lock resolving
    for the image's Python with pip --dry-run."""
    from ..reproduce.containers import dockerfile, label_problems, unpinned
    from ..reproduce.lock import check

    problems = []
    for arch in sorted(config.REPRODUCE):
        for b in unpinned(dockerfile(arch)):
            problems.append(f"{arch}: line {b.line}: FROM {b.ref} has no digest: run `kernelseek-suite container pin`")
        problems += [f"{arch}: {p}" for p in label_problems(arch)]
        if resolve:
            r = check(arch)
            click.echo(f"{arch}: {r.packages} pins, resolved in {r.seconds:.0f} s: {'ok' if r.ok else 'FAILED'}")
            problems += [f"{arch}: {p}" for p in r.problems]
    for p in problems:
        click.echo(p, err=True)
    click.echo("containers: " + ("ok" if not problems else f"{len(problems)} problem(s)"))
    sys.exit(FAIL if problems else OK)


COMMANDS = (reproduce_cmd, doctor_cmd, wheelhouse_cmd, render_cmd, verify_cmd, container_group)
