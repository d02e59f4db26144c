"""`kernelseek-suite compare`: the arms head-to-head, a thin layer over the headtohead package
(and scaleout/agent_runs.py with --executor dask)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..exitcodes import FAIL, NO_GPU, OK, USAGE
from .common import fail, key_values, say, task_options
from .scaleout import executor_options

NO_ENDPOINT = """\
No model endpoint is configured, and there are no traces under {traces} to regenerate from.
Point compare at an OpenAI-compatible endpoint with tool calling:
  export OPENAI_API_KEY=...        # a hosted API (the key is read from the environment only)
  kernelseek-suite compare --agents kernelseek,toolrich --task {task} --model MODEL [--base-url URL]
or, for a local server that needs no key:
  kernelseek-suite compare ... --model MODEL --base-url http://localhost:8000/v1
To rebuild the table and plot from traces you already have: --from-traces DIR."""


def _arm_options(items) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for item in items:
        arm, sep, kv = item.partition(":")
        if not sep or "=" not in kv:
            raise click.BadParameter(f"{item!r}: expected ARM:KEY=VALUE", param_hint="--agent-opt")
        out.setdefault(arm.strip(), {}).update(key_values([kv], "--agent-opt"))
    return out


UNSANDBOXED = """\
{what} needs the sandbox, and {why}.
Without it a candidate (and the agent's shell) can write outside its folder and read the repository's
kernels and results (docs/threat-model.md). Run where Landlock is available, or pass --allow-unsandboxed
to go ahead anyway (the table then says so)."""


def _sandbox_refusal(what: str, sandbox: str | None, allow_unsandboxed: bool) -> str | None:
    """Why `what` may not run here without --allow-unsandboxed, or None."""
    from ..agents.sandbox import landlock_status

    if allow_unsandboxed:
        return None
    available, detail = landlock_status()
    if sandbox == "none":
        return UNSANDBOXED.format(what=what, why="--sandbox none turns it off")
    if not available:
        return UNSANDBOXED.format(what=what, why=f"Landlock is not available here ({detail})")
    return None


def _render(traces: list[Path], out_dir: Path, remeasure_runs: bool, note: str = "", sandbox: str = "auto") -> None:
    from ..agents.exceptions import HarnessTampered
    from ..agents.sandbox import landlock_status
    from ..headtohead.compare import remeasure, remeasured_by_trace, unprotected
    from ..headtohead.report import render
    from ..headtohead.runstats import stats_from_trace

    new = {}
    if remeasure_runs:
        say(f"re-measuring the candidates of {len(traces)} trace(s) on this machine ...")
        try:
            rows = remeasure(
                traces,
                out_dir,
                sandbox=sandbox,
                on_result=lambda r: say(
                    f"  {Path(r.trace).name} evaluation {r.eval_index}: recorded {r.recorded_status} "
                    f"{'-' if r.recorded_geomean is None else f'{r.recorded_geomean:.3f}x'}, now {r.status} "
                    f"{'-' if r.geomean is None else f'{r.geomean:.3f}x'}"
                ),
            )
        except HarnessTampered as e:
            fail(str(e), FAIL)
        new = remeasured_by_trace(rows)
        if any(r.status == "no_gpu" for r in rows):
            say(
                "warning: some candidates could not be measured here (no suitable GPU); they count as "
                "not correct in the re-measured table"
            )
        note = (note + " " if note else "") + f"Speed-ups re-measured on this machine ({out_dir / 'remeasure.jsonl'})."
        if sandbox == "none" or not landlock_status()[0]:
            note += " The re-measurement ran without the sandbox (--allow-unsandboxed)."
    lacking = unprotected(traces)
    if lacking:
        note = (note + "\n\n" if note else "") + (
            "Runs without every protection (docs/threat-model.md), allowed with "
            "--allow-unsandboxed:\n" + "\n".join(f"- {x}" for x in lacking)
        )
    runs = [stats_from_trace(t, new.get(str(t))) for t in traces]
    outs = render(runs, out_dir, note)
    click.echo(outs.markdown.read_text())
    say(f"wrote {outs.markdown}, {outs.csv}, {outs.png}, {outs.svg}, {outs.runs_jsonl}")


@click.command("compare")
@click.option("--agents", "arms", default="kernelseek,toolrich", show_default=True, help="comma-separated arms")
@click.option("--task", default="fa-fwd-sm90", show_default=True)
@click.option("--model", "model_name", default=None, help="the model name the endpoint knows")
@click.option("--base-url", default=None, help="an OpenAI-compatible endpoint")
@click.option("--seeds", type=click.IntRange(min=1), default=1, show_default=True, help="runs per arm (seeds 1..N)")
@click.option("--max-steps", type=int, default=None)
@click.option("--max-evals", type=int, default=None)
@click.option("--max-wall", type=float, default=None, help="minutes per run")
@click.option("--max-tokens", type=int, default=None)
@click.option("--max-cost", type=float, default=None, help="USD per run")
@click.option("--price", nargs=2, type=float, default=None, metavar="IN OUT", help="USD per million tokens")
@click.option("--temperature", type=float, default=None)
@click.option("--kernel", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None)
@click.option("--goal", type=float, default=None)
@click.option("--task-opt", "task_opts", multiple=True, metavar="KEY=VALUE")
@click.option("--agent-opt", "agent_opts", multiple=True, metavar="ARM:KEY=VALUE", help="an option for one arm")
@click.option("--sandbox", type=click.Choice(["auto", "landlock", "none"]), default=None)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("results/compare"),
    show_default=True,
)
@click.option(
    "--from-traces",
    "from_traces",
    type=click.Path(exists=True, path_type=Path),
    default=None,
    help="regenerate the table and plot from the traces in DIR, without a model",
)
@click.option("--remeasure", is_flag=True, help="re-evaluate every recorded candidate on this machine first")
@click.option(
    "--allow-unsandboxed",
    is_flag=True,
    help="run (or re-measure) even without the sandbox; the table says so (docs/threat-model.md)",
)
@executor_options
def compare_cmd(
    arms,
    task,
    model_name,
    base_url,
    seeds,
    max_steps,
    max_evals,
    max_wall,
    max_tokens,
    max_cost,
    price,
    temperature,
    kernel,
    goal,
    task_opts,
    agent_opts,
    sandbox,
    out_dir,
    from_traces,
    remeasure,
    allow_unsandboxed,
    scaleout,
):
    """Run the arms head-to-head on one task, model and budget; table and plot in --out. With
    --executor dask the runs (arm x seed) are spread over the cluster's GPUs, one run per GPU at a
    time. Every run must have the sandbox (and every protection of docs/threat-model.md) unless
    --allow-unsandboxed is given."""
    from ..agents.arms import arm_names
    from ..agents.runner import api_key_from_env
    from ..headtohead.runstats import find_traces

    refusal = _sandbox_refusal("re-measuring" if remeasure else "compare", sandbox, allow_unsandboxed)
    if remeasure and refusal:
        fail(refusal, USAGE)
    remeasure_sandbox = sandbox or "auto"
    if from_traces:
        traces = find_traces(from_traces)
        if not traces:
            fail(f"no traces under {from_traces}", USAGE)
        _render(traces, out_dir, remeasure, sandbox=remeasure_sandbox)
        return
    api_key = api_key_from_env()
    if not api_key and not base_url:
        traces = find_traces(out_dir / "traces") if (out_dir / "traces").is_dir() else []
        if not traces:
            click.echo(NO_ENDPOINT.format(traces=out_dir / "traces", task=task), err=True)
            sys.exit(USAGE)
        say(
            f"no model endpoint configured (OPENAI_API_KEY or --base-url): regenerating from the "
            f"{len(traces)} trace(s) under {out_dir / 'traces'}"
        )
        _render(traces, out_dir, remeasure, sandbox=remeasure_sandbox)
        return
    if refusal:
        fail(refusal, USAGE)
    from ..headtohead.compare import CompareRequest, run_compare, run_spec

    names = [a.strip() for a in arms.split(",") if a.strip()]
    if "agent-cmd" in names and not allow_unsandboxed:
        fail(UNSANDBOXED.format(what="compare", why="the agent-cmd arm runs its command outside it"), USAGE)
    try:
        unknown = [a for a in names if a not in arm_names()]
        if unknown or len(set(names)) != len(names) or not names:
            raise click.BadParameter(f"{arms!r}: arms are {', '.join(arm_names())}, each once", param_hint="--agents")
        if not model_name:
            raise click.BadParameter("--model is required to run the arms (or use --from-traces)")
        model = {"name": model_name, "base_url": base_url, "temperature": temperature}
        if price:
            model.update(price_input_per_mtok=price[0], price_output_per_mtok=price[1])
        limits = {
            k: v
            for k, v in (
                ("max_steps", max_steps),
                ("max_evals", max_evals),
                ("max_tokens", max_tokens),
                ("max_cost", max_cost),
                ("max_wall_s", None if max_wall is None else max_wall * 60),
            )
            if v is not None
        }
        req = CompareRequest(
            arms=names,
            task=task,
            model=model,
            seeds=list(range(1, seeds + 1)),
            limits=limits,
            task_options=task_options(kernel, goal, task_opts),
            arm_options=_arm_options(agent_opts),
            # without --allow-unsandboxed a run that cannot have the sandbox fails, not falls back
            tools={"sandbox": sandbox or ("auto" if allow_unsandboxed else "landlock")},
            out_dir=str(out_dir),
            allow_unsandboxed=allow_unsandboxed,
        )
    except click.BadParameter as e:
        fail(e.format_message(), USAGE)

    def on_run(spec, rec):
        what = (
            "already finished, kept"
            if not rec["ran"]
            else (
                f"{rec['state']}: exit {rec['exit_reason']}, best "
                + (f"{rec['best']['geomean']:.3f}x" if rec.get("best") else "-")
            )
        )
        gpu = rec.get("gpu")
        where = (
            ""
            if not gpu
            else f" on {gpu['worker'] or gpu['host']}"
            + (f" (GPU {gpu['index']}, {gpu['host']})" if gpu["index"] is not None else "")
        )
        say(f"{spec.arm} seed {spec.seed}: {what}{where} ({spec.trace_path})")

    from functools import partial

    run, no_gpu, lost = partial(run_compare, runner=partial(run_spec, api_key=api_key)), (), ()
    if scaleout is not None:
        from ..gpu import NoGPUError
        from ..scaleout.agent_runs import RunsLost, run_compare_distributed

        run, no_gpu, lost = partial(run_compare_distributed, scaleout=scaleout), NoGPUError, RunsLost
    try:
        records = run(req, on_run=on_run)
    except no_gpu as e:
        fail(str(e), NO_GPU)
    except lost as e:
        fail(str(e), FAIL)
    except (ValueError, KeyError, FileNotFoundError, ImportError, RuntimeError) as e:
        fail(e.args[0] if isinstance(e, KeyError) and e.args else str(e), USAGE)
    _render([Path(r["trace"]) for r in records], out_dir, remeasure, sandbox=remeasure_sandbox)
    failed = [r for r in records if r.get("exit_reason") in ("model_error", "error", "harness_tampered")]
    sys.exit(FAIL if failed else OK)


COMMANDS = (compare_cmd,)
