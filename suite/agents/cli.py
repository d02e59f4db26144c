"""`kernelseek-suite run` and `kernelseek-suite traces ...`: a thin layer over the agents library."""
from __future__ import annotations

import signal
import sys
from pathlib import Path

import click

EXIT_FAIL = 1
EXIT_USAGE = 4


def _console():
    from rich.console import Console
    return Console(stderr=True)


def _key_values(items, hint) -> dict:
    import yaml
    opts = {}
    for item in items:
        if "=" not in item:
            raise click.BadParameter(f"{item!r}: expected KEY=VALUE", param_hint=hint)
        k, v = item.split("=", 1)
        opts[k.strip().replace("-", "_")] = yaml.safe_load(v)
    return opts


def _task_options(kernel, goal, task_opts) -> dict:
    opts = _key_values(task_opts, "--task-opt")
    if kernel:
        opts["kernel"] = str(Path(kernel).resolve())
    if goal is not None:
        opts["goal"] = goal
    return opts


@click.command("run")
@click.option("--agent", "arm", default="kernelseek", show_default=True, help="the arm: kernelseek, general or toolrich")
@click.option("--task", default="fa-fwd-sm90", show_default=True, help="fa-fwd-sm90 or cpu-attn")
@click.option("--model", "model_name", default=None, help="the model name the endpoint knows")
@click.option("--base-url", default=None, help="an OpenAI-compatible endpoint, e.g. http://localhost:8000/v1")
@click.option("--max-steps", type=int, default=None, help="model calls (default 200)")
@click.option("--max-evals", type=int, default=None, help="harness evaluations")
@click.option("--max-wall", type=float, default=None, help="minutes of wall time")
@click.option("--max-tokens", type=int, default=None, help="prompt + completion tokens")
@click.option("--max-cost", type=float, default=None, help="USD, when the endpoint reports or --price gives a cost")
@click.option("--price", nargs=2, type=float, default=None, metavar="IN OUT", help="USD per million tokens")
@click.option("--human", is_flag=True, help="a person at the terminal types the questions")
@click.option("--trace", "trace_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="where the trace goes (default runs/<run id>/trace.jsonl)")
@click.option("--resume", "resume_path", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="continue the run recorded in this trace")
@click.option("--kernel", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="the starting kernel (default: the task's own)")
@click.option("--goal", type=float, default=None, help="the geomean speed-up the goal asks for")
@click.option("--task-opt", "task_opts", multiple=True, metavar="KEY=VALUE", help="a task option (repeatable)")
@click.option("--agent-opt", "agent_opts", multiple=True, metavar="KEY=VALUE", help="an arm option (repeatable)")
@click.option("--temperature", type=float, default=None)
@click.option("--seed", type=int, default=None)
@click.option("--bank", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="the question bank (default bank/questions.yaml)")
@click.option("--sandbox", type=click.Choice(["auto", "landlock", "none"]), default=None,
              help="write protection for the shell tool (default auto)")
@click.option("--no-live", is_flag=True, help="no live view, only the events")
def run_cmd(arm, task, model_name, base_url, max_steps, max_evals, max_wall, max_tokens, max_cost, price, human,
            trace_path, resume_path, kernel, goal, task_opts, agent_opts, temperature, seed, bank, sandbox, no_live):
    """Run an agent on a task against an OpenAI-compatible endpoint (API key from OPENAI_API_KEY)."""
    from .bank import BankError
    from .config import RunConfig
    from .live import LiveView
    from .runner import RunSetupError, api_key_from_env, new_run, resume_run

    console = _console()
    api_key = api_key_from_env()
    limits = {k: v for k, v in (("max_steps", max_steps), ("max_evals", max_evals), ("max_tokens", max_tokens),
                                ("max_cost", max_cost),
                                ("max_wall_s", None if max_wall is None else max_wall * 60)) if v is not None}
    view: LiveView | None = None

    def ask_human(decision, suggestion):
        view.pause()
        try:
            console.print(f"\n[bold]decision point: {decision.trigger}[/]  {decision.evidence}")
            if suggestion:
                console.print(f"bank suggests ({suggestion.category}, {suggestion.id}): {suggestion.text}")
            return click.prompt("your question (Enter takes the suggestion)", default="", show_default=False,
                                err=True)
        finally:
            view.unpause()

    try:
        if resume_path:
            overrides = {k: v for k, v in (("base_url", base_url), ("name", model_name)) if v}
            if price:
                overrides.update(price_input_per_mtok=price[0], price_output_per_mtok=price[1])
            agent = resume_run(resume_path, api_key, limits=limits, model_overrides=overrides,
                               ask_human=ask_human if human else None)
        else:
            if not model_name:
                raise RunSetupError("--model is required (or --resume a trace)")
            if not api_key and not base_url:
                raise RunSetupError("set OPENAI_API_KEY, or give --base-url for an endpoint that needs no key")
            cfg = RunConfig(arm=arm, arm_options=_key_values(agent_opts, "--agent-opt"), task=task,
                            task_options=_task_options(kernel, goal, task_opts), seed=seed, human=human)
            cfg.model.name, cfg.model.base_url, cfg.model.temperature = model_name, base_url, temperature
            if price:
                cfg.model.price_input_per_mtok, cfg.model.price_output_per_mtok = price
            for k, v in limits.items():
                setattr(cfg.limits, k, v)
            if bank:
                cfg.questions.bank_path = str(bank.resolve())
            if sandbox:
                cfg.tools.sandbox = sandbox
            agent = new_run(cfg, trace_path, api_key, ask_human=ask_human if human else None)
    except (RunSetupError, BankError, KeyError, ValueError, FileNotFoundError, ImportError, RuntimeError) as e:
        msg = e.args[0] if isinstance(e, KeyError) and e.args else str(e)
        click.echo(f"error: {msg}", err=True)
        sys.exit(EXIT_USAGE)

    ctx = agent.ctx
    console.print(f"trace: {ctx.trace.path}  workspace: {ctx.workspace.root}  sandbox: {ctx.workspace.sandbox_detail}")
    if not ctx.workspace.sandboxed:
        console.print("warning: no sandbox: the shell and the candidates can read and write wherever you can "
                      "(docs/threat-model.md)")
    view = LiveView(console, ctx.config.limits, enabled=not no_live and console.is_terminal)
    ctx.trace.listeners.append(view.on_event)
    if not view.enabled:
        ctx.trace.listeners.append(lambda ev: _plain(console, ev))
    def on_term(signum, frame):     # a polite kill ends the run like Ctrl-C: traced, resumable
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    with view:
        result = agent.run()
    console.print(f"exit: {result.exit_reason}" + (f" ({result.limit})" if result.limit else "") + f": {result.message}")
    best = result.best
    console.print(f"best: {best['geomean']:.3f}x (evaluation {best['eval_index']}, blob {best['candidate_sha256'][:12]})"
                  if best else "best: no correct evaluation")
    t = result.totals
    console.print(f"{t['steps']} steps, {t['evals']} evaluations, {t['total_tokens']} tokens, "
                  f"{t['wall_s']:.0f}s; goal {'met' if result.goal_met else 'not met'}; trace {result.trace_path}")
    sys.exit(0 if result.goal_met and result.exit_reason != "harness_tampered" else EXIT_FAIL)


def _plain(console, ev: dict) -> None:
    from .trace import timeline_lines
    if ev["type"] in ("llm_call", "harness_eval", "question", "retry", "exit", "resume"):
        for line in timeline_lines([ev]):
            console.print(line, markup=False, highlight=False)


@click.group("traces")
def traces_group():
    """Validate and read agent run traces."""


@traces_group.command("validate")
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
def traces_validate(files):
    """Check FILES against the trace schema; exit 1 if any is invalid."""
    from .trace import validate_trace

    bad = 0
    for f in files:
        v = validate_trace(f)
        click.echo(f"{f}: {'valid' if v.ok else 'INVALID'} ({v.events} events)")
        for e in v.errors[:50]:
            click.echo(f"  error: {e}")
        if len(v.errors) > 50:
            click.echo(f"  ... and {len(v.errors) - 50} more errors")
        for n in v.notes:
            click.echo(f"  note: {n}")
        bad += not v.ok
    sys.exit(EXIT_FAIL if bad else 0)


@traces_group.command("show")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
def traces_show(file):
    """A readable timeline of a run."""
    from .trace import read_trace, timeline_lines

    tf = read_trace(file)
    for line in timeline_lines(tf.events):
        click.echo(line)
    for p in tf.problems:
        click.echo(f"warning: {p}", err=True)


def register(main: click.Group) -> None:
    main.add_command(run_cmd)
    main.add_command(traces_group)
