"""`kernelseek-suite compare`: the arms head-to-head, a thin layer over the headtohead package
(and scaleout/agent_runs.py with --executor dask)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..contracts.exitcodes import ENDPOINT, EVALUATOR, FAIL, NO_GPU, OK, USAGE
from .common import fail, key_values, say, task_options
from .scaleout import executor_options

NO_ENDPOINT = """\
No model endpoint is configured, and there are no traces under {traces} to regenerate from.
Point compare at an OpenAI-compatible endpoint with tool calling:
  export OPENAI_API_KEY=...        # a hosted API (the key is read from the environment only)
  kernelseek-suite compare --agents kernelseek,toolrich --task {task} --model MODEL [--base-url URL]
or, for a local server that needs no key:
  kernelseek-suite compare ... --model MODEL --base-url http://localhost:8000/v1
To see what a comparison would take first: --plan. To rebuild the table and plot from traces you
already have: --from-traces DIR."""

# options a protocol fixes: given beside --protocol they are an error (edit a copy of the protocol)
FIXED_BY_PROTOCOL = (
    "arms",
    "task",
    "seeds",
    "max_steps",
    "max_evals",
    "max_wall",
    "max_tokens",
    "max_cost",
    "temperature",
    "stream",
    "kernel",
    "goal",
    "task_opts",
    "agent_opts",
    "categories",
    "plateau",
    "repeats",
    "spacing",
    "sandbox",
    "aa_arm",
    "aa_repeats",
    "rebench",
    "min_runs",
)


def _arms(spec: str) -> tuple[list[str], dict[str, str]]:
    """`kernelseek,info=kernelseek,codex=agent-cmd` -> labels in order, label -> agent."""
    labels, agents = [], {}
    for item in (a.strip() for a in spec.split(",")):
        if not item:
            continue
        label, _, agent = item.partition("=")
        label, agent = label.strip(), (agent.strip() or label.strip())
        labels.append(label)
        agents[label] = agent
    return labels, agents


def _arm_options(items) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for item in items:
        arm, sep, kv = item.partition(":")
        if not sep or "=" not in kv:
            raise click.BadParameter(f"{item!r}: expected ARM:KEY=VALUE", param_hint="--agent-opt")
        out.setdefault(arm.strip(), {}).update(key_values([kv], "--agent-opt"))
    return out


def question_options(categories, plateau, repeats, spacing) -> dict:
    """The question settings given on the command line, as arm options."""
    out = {}
    if categories:
        out["categories"] = [c.strip() for c in categories.split(",") if c.strip()]
    for key, value in (("plateau_evals", plateau), ("repeated_failure", repeats), ("min_steps_between", spacing)):
        if value is not None:
            out[key] = value
    return out


def _with_questions(labels, agents, arm_opts: dict, questions: dict) -> dict:
    """The question settings given to every arm that takes them (an arm's own options win); none taking
    them is an error."""
    from ..agents.arms import arm_options

    if not questions:
        return arm_opts

    def takes(label: str) -> bool:
        try:
            return set(questions) <= set(arm_options(agents[label]))
        except KeyError:  # an unknown agent: _check_arms says so
            return False

    takers = [label for label in labels if takes(label)]
    if not takers:
        raise click.BadParameter(f"no arm takes the question settings ({', '.join(questions)})")
    return {**arm_opts, **{label: {**questions, **arm_opts.get(label, {})} for label in takers}}


def _check_arms(labels, agents, arm_opts) -> None:
    """Every arm and option checked before anything runs."""
    from ..agents.arms import ArmOptionError, arm_names, check_options
    from ..agents.arms.kernelseek import question_settings

    known = arm_names()
    bad = [agents[label] for label in labels if agents[label] not in known]
    if bad or len(set(labels)) != len(labels) or not labels:
        raise click.BadParameter(
            f"arms are {', '.join(known)} (or LABEL=AGENT), each label once", param_hint="--agents"
        )
    for label in arm_opts:
        if label not in agents:
            raise click.BadParameter(
                f"{label!r} is not one of the arms ({', '.join(labels)})", param_hint="--agent-opt"
            )
    try:
        for label in labels:
            check_options(agents[label], arm_opts.get(label, {}))
            question_settings(arm_opts.get(label, {}))
    except ArmOptionError as e:
        raise click.BadParameter(f"{label}: {e}", param_hint="--agent-opt") from e


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


UNSANDBOXED_RUNS = """\
{n} of the runs ran without the sandbox:
{runs}
Their shell, candidates or agent command could write outside their folders and read the repository's
kernels and results (docs/threat-model.md). Pass --allow-unsandboxed to take them anyway (the table
then lists them)."""


def _render(
    traces: list[Path],
    out_dir: Path,
    remeasure_runs: bool,
    final_bench: dict | None,
    note: str = "",
    sandbox: str = "auto",
    control: dict | None = None,
    allow_unsandboxed: bool = False,
) -> None:
    from ..agents.exceptions import EvaluatorFailed, HarnessTampered
    from ..agents.sandbox import landlock_status
    from ..headtohead.compare import (
        _machine,
        interpreter_changes,
        remeasure,
        remeasured_by_trace,
        unprotected,
        unsandboxed,
    )

    if not allow_unsandboxed:
        bare = unsandboxed(traces)
        if bare:
            fail(UNSANDBOXED_RUNS.format(n=len(bare), runs="\n".join(f"- {r}" for r in bare)), USAGE)
    out_dir.mkdir(parents=True, exist_ok=True)  # --from-traces into a new folder
    from ..headtohead.final import FINAL_FILE, aa_control, bench_all, full_grid_repeats, read_rows
    from ..headtohead.noise import NOISE_FILE, read_noise, trace_repeats, write_noise
    from ..headtohead.protocol import CONTROL_DEFAULTS
    from ..headtohead.report import render
    from ..headtohead.runstats import stats_from_trace
    from ..reports.trace_html import render_traces

    control = {**CONTROL_DEFAULTS, **(control or {})}

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
        except EvaluatorFailed as e:
            fail(str(e), EVALUATOR)
        new = remeasured_by_trace(rows)
        if any(r.status == "no_gpu" for r in rows):
            say(
                "warning: some candidates could not be measured here (no suitable GPU); they count as "
                "not correct in the re-measured table"
            )
        note = (note + " " if note else "") + f"Speed-ups re-measured on this machine ({out_dir / 'remeasure.jsonl'})."
        if sandbox == "none" or not landlock_status()[0]:
            note += " The re-measurement ran without the sandbox (--allow-unsandboxed)."
    lacking = unprotected(traces) + interpreter_changes(traces)
    if lacking:
        note = (note + "\n\n" if note else "") + (
            "Runs without every protection (docs/threat-model.md), allowed with "
            "--allow-unsandboxed:\n" + "\n".join(f"- {x}" for x in lacking)
        )
    fb = final_bench or {}
    measured = bool(fb.get("enabled"))
    aa = [r for r in read_noise(out_dir / NOISE_FILE) if r.source == "aa"]  # an earlier A/A control
    if measured:
        k = control["rebench"]
        say(f"benching each run's best kernel on its task's full grid, {k} times ({len(traces)} run(s)) ...")
        bench_all(
            traces,
            out_dir,
            fb.get("timeout_s", 3600),
            new,
            sandbox=sandbox,
            repeats=k,
            on_result=lambda r: say(
                f"  {Path(r.trace).name}: {r.status} "
                + (f"{r.geomean:.3f}x" if r.geomean is not None else "")
                + (f" ({r.note})" if r.note else "")
            ),
        )
        aa = []
        for trace in _first_trace_per_task(traces):
            n = control["aa_repeats"]
            say(f"A/A control: the starting kernel of {trace.name}'s task evaluated {n} times as in a run ...")
            rep = aa_control(trace, out_dir, n, fb.get("timeout_s", 3600), sandbox)
            say(
                f"  {rep.task}: "
                + (", ".join(f"{v:.3f}x" for v in rep.values) or "-")
                + (f" ({rep.status}: {rep.note})" if rep.status != "ok" else "")
            )
            aa.append(rep)
    finals = read_rows(out_dir / FINAL_FILE)
    runs = [stats_from_trace(t, new.get(str(t)), finals.get(str(t))) for t in traces]
    tasks = {r.trace: r.task for r in runs}
    noise = aa + full_grid_repeats({t: finals[t] for t in tasks if t in finals}, tasks) + trace_repeats(traces)
    write_noise(out_dir / NOISE_FILE, noise, _machine())
    outs = render(runs, out_dir, note, control["min_runs"], noise)
    # the runs themselves, browsable: two arms side by side
    page = render_traces(traces, out_dir / "traces.html", title=f"Head-to-head: {len(traces)} runs")
    click.echo(outs.markdown.read_text())
    say(f"wrote {outs.markdown}, {outs.csv}, {outs.stats}, {outs.png}, {outs.svg}, {outs.runs_jsonl}, {page}")


def _first_trace_per_task(traces: list[Path]) -> list[Path]:
    from ..contracts.traces import read_trace

    seen: dict[str, Path] = {}
    for t in traces:
        events = read_trace(t).events
        task = (events[0].get("task") or {}).get("name", "") if events else ""
        seen.setdefault(task, t)
    return list(seen.values())


def _with_aa_arm(labels: list[str], agents: dict, arm_opts: dict, aa_arm: str | None) -> None:
    """The A/A copy of `aa_arm` (the same agent and options, labelled `<arm>-aa`) added in place."""
    from ..headtohead.report import AA_SUFFIX

    if not aa_arm:
        return
    if aa_arm not in labels:
        raise click.BadParameter(f"the A/A arm {aa_arm!r} is not one of the arms ({', '.join(labels)})")
    copy = aa_arm + AA_SUFFIX
    if copy in labels:
        raise click.BadParameter(f"{copy!r} is the A/A copy of {aa_arm!r}: no arm may have that label")
    labels.append(copy)
    agents[copy] = agents[aa_arm]
    if aa_arm in arm_opts:
        arm_opts[copy] = dict(arm_opts[aa_arm])


def _from_protocol(
    path, given: dict, model_name, base_url, price, context_tokens, out_dir, final_bench, allow_unsandboxed
):
    """A CompareRequest from a protocol file; the command line may fill what the protocol leaves open
    (the model, the endpoint, the price, the context window), never change what it fixes."""
    from ..headtohead.compare import CompareRequest
    from ..headtohead.protocol import ProtocolError, load_protocol

    try:
        proto = load_protocol(path)
    except ProtocolError as e:
        fail(str(e), USAGE)
    fixed = [k for k in FIXED_BY_PROTOCOL if given.get(k) not in (None, (), False)]
    if fixed:
        fail(
            f"the protocol {proto.path} fixes {', '.join('--' + k.replace('_', '-') for k in fixed)}; edit a "
            "copy of it instead",
            USAGE,
        )
    model = proto.model()
    for key, value in (("name", model_name), ("base_url", base_url)):
        if value is not None:
            if model.get(key) not in (None, value):
                fail(
                    f"the protocol {proto.path} fixes the model's {key} ({model[key]}); edit a copy of it instead",
                    USAGE,
                )
            model[key] = value
    if price:
        model.update(price_input_per_mtok=price[0], price_output_per_mtok=price[1])
    window = proto.data.get("context_tokens")
    if context_tokens is not None:
        if window not in (None, context_tokens):
            fail(f"the protocol {proto.path} fixes the context window ({window} tokens)", USAGE)
        window = context_tokens
    arms = proto.arms()
    labels, agents = list(arms), {label: a["agent"] for label, a in arms.items()}
    arm_opts = {label: a["options"] for label, a in arms.items() if a["options"]}
    control = proto.control()
    try:
        _with_aa_arm(labels, agents, arm_opts, control["aa_arm"])
        arm_opts = _with_questions(labels, agents, arm_opts, proto.question_options())
        _check_arms(labels, agents, arm_opts)
    except click.BadParameter as e:
        fail(f"{proto.path}: {e.format_message()}", USAGE)
    fb = proto.final_bench()
    if final_bench is not None:
        fb["enabled"] = final_bench
    req = CompareRequest(
        arms=labels,
        task=proto.data["task"]["name"],
        model=model,
        seeds=proto.seeds(),
        limits=proto.limits(),
        task_options=proto.task_options(),
        arm_options=arm_opts,
        # without --allow-unsandboxed a run that cannot have the sandbox fails, not falls back
        tools={"sandbox": proto.data.get("sandbox") or ("auto" if allow_unsandboxed else "landlock")},
        out_dir=str(out_dir),
        allow_unsandboxed=allow_unsandboxed,
        agents=agents,
        context={"window_tokens": window} if window else {},
        final_bench=fb,
        protocol={"name": proto.name, "path": proto.path, "sha256": proto.sha256},
        control=control,
    )
    return req, proto


def _print_plan(req, proto) -> None:
    from ..headtohead.estimate import PlanInputs, make_plan

    plan = (proto.data.get("plan") or {}) if proto else {}
    price = None
    if req.model.get("price_input_per_mtok") is not None:
        price = (req.model["price_input_per_mtok"], req.model.get("price_output_per_mtok") or 0.0)
    inputs = PlanInputs(
        proto.name if proto else "command line",
        {label: req.agent(label) for label in req.arms},
        req.seeds,
        req.task,
        req.limits,
        plan.get("eval_seconds") or [],
        plan.get("final_bench_seconds"),
        bool(req.final_bench.get("enabled")),
        plan.get("gpu"),
        req.context.get("window_tokens"),
        req.model.get("max_output_tokens"),
        price,
        req.model.get("name"),
        rebench=req.control["rebench"],
        aa_repeats=req.control["aa_repeats"],
        classifying=[
            label
            for label in req.arms
            if req.agent(label) == "kernelseek" and req.arm_options.get(label, {}).get("classify_claims", True)
        ],
    )
    title = f"{inputs.name}" + (f" ({proto.path}, sha256 {proto.sha256[:12]})" if proto else "")
    click.echo(make_plan(inputs).text(title))
    if proto:
        for item in proto.data.get("disclosed") or []:
            click.echo(f"disclosed: {item}")
        for key, why in (proto.data.get("choices") or {}).items():
            click.echo(f"chosen here ({key}): {why}")


@click.command("compare")
@click.option(
    "--protocol",
    "protocol_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="a protocol file that fixes the comparison (protocols/paper.yaml, protocols/smoke.yaml)",
)
@click.option(
    "--plan",
    "plan_only",
    is_flag=True,
    help="print the runs, evaluations, GPU-hours, tokens and cost expected, and exit (no model is called)",
)
@click.option(
    "--agents",
    "arms",
    default=None,
    help="comma-separated arms, LABEL=AGENT to name one [default: kernelseek,toolrich]",
)
@click.option("--task", default=None, help="[default: fa-fwd-sm90]")
@click.option("--model", "model_name", default=None, help="the model name the endpoint knows")
@click.option("--base-url", default=None, help="an OpenAI-compatible endpoint")
@click.option("--seeds", type=click.IntRange(min=1), default=None, help="runs per arm (seeds 1..N) [default: 1]")
@click.option("--max-steps", type=int, default=None)
@click.option("--max-evals", type=int, default=None)
@click.option("--max-wall", type=float, default=None, help="minutes per run")
@click.option("--max-tokens", type=int, default=None)
@click.option("--max-cost", type=float, default=None, help="USD per run")
@click.option("--price", nargs=2, type=float, default=None, metavar="IN OUT", help="USD per million tokens")
@click.option(
    "--price-cached", type=float, default=None, metavar="USD", help="per million cached prompt tokens [default: IN]"
)
@click.option("--stream", is_flag=True, default=None, help="stream answers (server-sent events): for long generations")
@click.option("--temperature", type=float, default=None)
@click.option(
    "--context-tokens",
    type=click.IntRange(min=1000),
    default=None,
    help="the model's context window (default: the endpoint's, where it says it)",
)
@click.option("--max-attempts", type=click.IntRange(min=1), default=None, help="tries per model call (default 6)")
@click.option("--retry-budget", type=float, default=None, help="seconds one model call may spend on retries")
@click.option("--kernel", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None)
@click.option("--goal", type=float, default=None)
@click.option("--task-opt", "task_opts", multiple=True, metavar="KEY=VALUE")
@click.option("--agent-opt", "agent_opts", multiple=True, metavar="ARM:KEY=VALUE", help="an option for one arm")
@click.option("--categories", default=None, help="question categories, comma-separated (arms that ask questions)")
@click.option("--plateau", type=click.IntRange(min=1), default=None, help="K evaluations without a new best")
@click.option("--repeats", type=click.IntRange(min=1), default=None, help="the same failure N times")
@click.option("--spacing", type=click.IntRange(min=0), default=None, help="steps between questions")
@click.option("--sandbox", type=click.Choice(["auto", "landlock", "none"]), default=None)
@click.option("--aa", "aa_arm", default=None, help="an A/A control: run this arm a second time per seed (as ARM-aa)")
@click.option(
    "--aa-repeats",
    type=click.IntRange(min=3),
    default=None,
    help="the A/A control: the starting kernel evaluated N times as in a run [default: 5]",
)
@click.option(
    "--rebench", type=click.IntRange(min=3), default=None, help="final bench: each best kernel K times [default: 3]"
)
@click.option(
    "--min-runs",
    type=click.IntRange(min=2),
    default=None,
    help="runs with a value per arm below which no interval is given (insufficient runs) [default: 3]",
)
@click.option(
    "--final-bench/--no-final-bench",
    "final_bench",
    default=None,
    help="bench each run's best kernel on the task's full grid at the end [default: on]",
)
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
    protocol_path,
    plan_only,
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
    price_cached,
    stream,
    temperature,
    context_tokens,
    max_attempts,
    retry_budget,
    kernel,
    goal,
    task_opts,
    agent_opts,
    categories,
    plateau,
    repeats,
    spacing,
    sandbox,
    aa_arm,
    aa_repeats,
    rebench,
    min_runs,
    final_bench,
    out_dir,
    from_traces,
    remeasure,
    allow_unsandboxed,
    scaleout,
):
    """Run the arms head-to-head on one task, model and budget; table, interval and plot in --out.
    With --protocol the comparison is the protocol's; --plan prints what it takes and calls no model.
    With --executor dask the runs (arm x seed) are spread over the cluster's GPUs, one per GPU at a
    time. Every run must have the sandbox (and every protection of docs/threat-model.md) unless
    --allow-unsandboxed is given."""
    from functools import partial

    from ..agents.runner import api_key_from_env
    from ..headtohead.compare import CompareRequest, run_compare, run_spec
    from ..headtohead.protocol import CONTROL_DEFAULTS
    from ..headtohead.runstats import find_traces

    refusal = _sandbox_refusal("re-measuring" if remeasure else "compare", sandbox, allow_unsandboxed)
    if remeasure and refusal:
        fail(refusal, USAGE)
    remeasure_sandbox = sandbox or "auto"
    control = {
        **CONTROL_DEFAULTS,
        **{
            k: v
            for k, v in (("aa_arm", aa_arm), ("aa_repeats", aa_repeats), ("rebench", rebench), ("min_runs", min_runs))
            if v is not None
        },
    }
    if from_traces:
        traces = find_traces(from_traces)
        if not traces:
            fail(f"no traces under {from_traces}", USAGE)
        _render(
            traces,
            out_dir,
            remeasure,
            {"enabled": bool(final_bench), "timeout_s": 3600.0},
            sandbox=remeasure_sandbox,
            control=control,
            allow_unsandboxed=allow_unsandboxed,
        )
        return
    given = dict(
        arms=arms,
        task=task,
        seeds=seeds,
        max_steps=max_steps,
        max_evals=max_evals,
        max_wall=max_wall,
        max_tokens=max_tokens,
        max_cost=max_cost,
        temperature=temperature,
        stream=stream,
        kernel=kernel,
        goal=goal,
        task_opts=task_opts,
        agent_opts=agent_opts,
        categories=categories,
        plateau=plateau,
        repeats=repeats,
        spacing=spacing,
        sandbox=sandbox,
        aa_arm=aa_arm,
        aa_repeats=aa_repeats,
        rebench=rebench,
        min_runs=min_runs,
    )
    proto = None
    if protocol_path:
        req, proto = _from_protocol(
            protocol_path, given, model_name, base_url, price, context_tokens, out_dir, final_bench, allow_unsandboxed
        )
    else:
        try:
            labels, agents = _arms(arms or "kernelseek,toolrich")
            arm_opts = _arm_options(agent_opts)
            _with_aa_arm(labels, agents, arm_opts, aa_arm)
            arm_opts = _with_questions(
                labels, agents, arm_opts, question_options(categories, plateau, repeats, spacing)
            )
            _check_arms(labels, agents, arm_opts)
        except click.BadParameter as e:
            fail(e.format_message(), USAGE)
        model = {"name": model_name, "base_url": base_url, "temperature": temperature, "stream": bool(stream)}
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
            arms=labels,
            task=task or "fa-fwd-sm90",
            model=model,
            seeds=list(range(1, (seeds or 1) + 1)),
            limits=limits,
            task_options=task_options(kernel, goal, task_opts),
            arm_options=arm_opts,
            # without --allow-unsandboxed a run that cannot have the sandbox fails, not falls back
            tools={"sandbox": sandbox or ("auto" if allow_unsandboxed else "landlock")},
            out_dir=str(out_dir),
            allow_unsandboxed=allow_unsandboxed,
            agents=agents,
            context={"window_tokens": context_tokens} if context_tokens else {},
            final_bench={"enabled": final_bench is not False, "timeout_s": 3600.0},
            control=control,
        )
    for key, value in (
        ("max_attempts", max_attempts),
        ("retry_budget_s", retry_budget),
        ("price_cached_input_per_mtok", price_cached),
    ):
        if value is not None:
            req.model[key] = value
    if plan_only:
        _print_plan(req, proto)
        return
    needs_model = any(req.agent(label) != "agent-cmd" for label in req.arms)
    api_key = api_key_from_env()
    if needs_model and not api_key and not req.model.get("base_url"):
        traces = find_traces(out_dir / "traces") if (out_dir / "traces").is_dir() else []
        if not traces:
            click.echo(NO_ENDPOINT.format(traces=out_dir / "traces", task=req.task), err=True)
            sys.exit(USAGE)
        say(
            f"no model endpoint configured (OPENAI_API_KEY or --base-url): regenerating from the "
            f"{len(traces)} trace(s) under {out_dir / 'traces'}"
        )
        _render(
            traces,
            out_dir,
            remeasure,
            None,
            sandbox=remeasure_sandbox,
            control=req.control,
            allow_unsandboxed=allow_unsandboxed,
        )
        return
    if needs_model and not req.model.get("name"):
        fail(
            "--model is required to run the arms"
            + (" (the protocol leaves the model open)" if proto else " (or use --from-traces)"),
            USAGE,
        )
    if proto and proto.data.get("sandbox"):
        refusal = _sandbox_refusal("compare", proto.data["sandbox"], allow_unsandboxed)
    if refusal:
        fail(refusal, USAGE)
    from ..agents.config import RunConfig
    from ..agents.external import command_sandbox
    from ..agents.runner import unpriced_cost_limit
    from ..headtohead.compare import plan as plan_runs

    configs = [RunConfig.from_dict(spec.config) for spec in plan_runs(req)]
    problem = next((p for c in configs if (p := unpriced_cost_limit(c))), None)
    if problem:
        fail(problem, USAGE)
    try:
        outside = [c.label or c.arm for c in configs if c.arm == "agent-cmd" and not command_sandbox(c)[0]]
    except (ValueError, RuntimeError) as e:
        fail(str(e), USAGE)
    if not allow_unsandboxed and outside:
        why = f"the agent-cmd arm runs its command outside it ({', '.join(sorted(set(outside)))})"
        fail(UNSANDBOXED.format(what="compare", why=why), USAGE)

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

    run, no_gpu, lost = partial(run_compare, runner=partial(run_spec, api_key=api_key)), (), ()
    if scaleout is not None:
        from ..gpu import NoGPUError
        from ..scaleout.agent_runs import RunsLost, run_compare_distributed

        run, no_gpu, lost = partial(run_compare_distributed, scaleout=scaleout), NoGPUError, RunsLost
    if proto:
        say(
            f"protocol {proto.name} ({proto.path}, sha256 {proto.sha256[:12]}): {len(req.arms)} arms x "
            f"{len(req.seeds)} seeds"
        )
    try:
        records = run(req, on_run=on_run)
    except no_gpu as e:
        fail(str(e), NO_GPU)
    except lost as e:
        fail(str(e), FAIL)
    except (ValueError, KeyError, FileNotFoundError, ImportError, RuntimeError) as e:
        fail(e.args[0] if isinstance(e, KeyError) and e.args else str(e), USAGE)
    note = f"Protocol {proto.name} ({proto.path}, sha256 {proto.sha256[:12]})." if proto else ""
    _render(
        [Path(r["trace"]) for r in records],
        out_dir,
        remeasure,
        req.final_bench,
        note,
        sandbox=remeasure_sandbox,
        control=req.control,
        allow_unsandboxed=allow_unsandboxed,
    )
    reasons = {r.get("exit_reason") for r in records}
    statuses = {r.get("evaluator_status") for r in records} - {None}
    if "harness_tampered" in reasons:
        sys.exit(FAIL)
    if statuses:  # a run stopped by the evaluator's own failure: no verdict on its kernel
        sys.exit(NO_GPU if statuses == {"no_gpu"} else EVALUATOR)
    if "model_error" in reasons:
        sys.exit(ENDPOINT)
    sys.exit(FAIL if "error" in reasons else OK)


COMMANDS = (compare_cmd,)
