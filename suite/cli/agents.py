"""`kernelseek-suite run`: one agent run, a thin layer over the agents library."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import click

from ..contracts.exitcodes import ENDPOINT, EVALUATOR, FAIL, NO_GPU, OK, USAGE
from .common import console, fail, key_values, task_options


@click.command("run")
@click.option(
    "--agent",
    "arm",
    default="kernelseek",
    show_default=True,
    help="the arm: kernelseek, general, toolrich or agent-cmd",
)
@click.option(
    "--agent-cmd",
    "agent_cmd",
    default=None,
    metavar="COMMAND",
    help="an existing coding-agent command line run in the harness (the agent-cmd arm), e.g. "
    '"codex exec --sandbox workspace-write" or "claude -p --permission-mode acceptEdits"',
)
@click.option("--task", default="fa-fwd-sm90", show_default=True, help="fa-fwd-sm90 or cpu-attn")
@click.option("--model", "model_name", default=None, help="the model name the endpoint knows")
@click.option("--base-url", default=None, help="an OpenAI-compatible endpoint, e.g. http://localhost:8000/v1")
@click.option("--max-steps", type=int, default=None, help="model calls (default 200)")
@click.option("--max-evals", type=int, default=None, help="harness evaluations")
@click.option("--max-wall", type=float, default=None, help="minutes of wall time")
@click.option("--max-tokens", type=int, default=None, help="prompt + completion tokens")
@click.option("--max-cost", type=float, default=None, help="USD, when the endpoint reports or --price gives a cost")
@click.option("--price", nargs=2, type=float, default=None, metavar="IN OUT", help="USD per million tokens")
@click.option(
    "--price-cached", type=float, default=None, metavar="USD", help="per million cached prompt tokens [default: IN]"
)
@click.option("--stream", is_flag=True, default=None, help="stream answers (server-sent events): for long generations")
@click.option("--human", is_flag=True, help="a person at the terminal types the questions")
@click.option(
    "--trace",
    "trace_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="where the trace goes (default runs/<run id>/trace.jsonl)",
)
@click.option(
    "--resume",
    "resume_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="continue the run recorded in this trace",
)
@click.option(
    "--kernel",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="the starting kernel (default: the task's own)",
)
@click.option("--goal", type=float, default=None, help="the geomean speed-up the goal asks for")
@click.option("--task-opt", "task_opts", multiple=True, metavar="KEY=VALUE", help="a task option (repeatable)")
@click.option("--agent-opt", "agent_opts", multiple=True, metavar="KEY=VALUE", help="an arm option (repeatable)")
@click.option("--temperature", type=float, default=None)
@click.option(
    "--context-tokens",
    type=click.IntRange(min=1000),
    default=None,
    help="the model's context window (default: the endpoint's, where it says it)",
)
@click.option("--max-attempts", type=click.IntRange(min=1), default=None, help="tries per model call (default 6)")
@click.option("--retry-budget", type=float, default=None, help="seconds one model call may spend on retries")
@click.option("--categories", default=None, help="question categories, comma-separated (kernelseek, agent-cmd)")
@click.option("--plateau", type=click.IntRange(min=1), default=None, help="K evaluations without a new best")
@click.option("--repeats", type=click.IntRange(min=1), default=None, help="the same failure N times")
@click.option("--spacing", type=click.IntRange(min=0), default=None, help="steps between questions")
@click.option("--seed", type=int, default=None)
@click.option(
    "--bank",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="the question bank (default bank/questions.yaml)",
)
@click.option(
    "--sandbox",
    type=click.Choice(["auto", "landlock", "none"]),
    default=None,
    help="write protection for the shell tool (default auto)",
)
@click.option("--no-live", is_flag=True, help="no live view, only the events")
def run_cmd(
    arm,
    agent_cmd,
    task,
    model_name,
    base_url,
    max_steps,
    max_evals,
    max_wall,
    max_tokens,
    max_cost,
    price,
    price_cached,
    stream,
    human,
    trace_path,
    resume_path,
    kernel,
    goal,
    task_opts,
    agent_opts,
    temperature,
    context_tokens,
    max_attempts,
    retry_budget,
    categories,
    plateau,
    repeats,
    spacing,
    seed,
    bank,
    sandbox,
    no_live,
):
    """Run an agent on a task against an OpenAI-compatible endpoint (API key from OPENAI_API_KEY), or an
    existing coding-agent command in the harness (--agent-cmd)."""
    from ..agents.bank import BankError
    from ..agents.config import RunConfig
    from ..agents.live import LiveView
    from ..agents.runner import RunSetupError, api_key_from_env, new_run, resume_run
    from .compare import question_options

    api_key = api_key_from_env()
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
    view: LiveView | None = None

    def ask_human(decision, suggestion):
        view.pause()
        try:
            console.print(f"\n[bold]decision point: {decision.trigger}[/]  {decision.evidence}")
            if suggestion:
                console.print(f"bank suggests ({suggestion.category}, {suggestion.id}): {suggestion.text}")
            return click.prompt("your question (Enter takes the suggestion)", default="", show_default=False, err=True)
        finally:
            view.unpause()

    try:
        if resume_path:
            overrides = {
                k: v
                for k, v in (
                    ("base_url", base_url),
                    ("name", model_name),
                    ("max_attempts", max_attempts),
                    ("retry_budget_s", retry_budget),
                )
                if v
            }
            if price:
                overrides.update(price_input_per_mtok=price[0], price_output_per_mtok=price[1])
            if price_cached is not None:
                overrides["price_cached_input_per_mtok"] = price_cached
            if stream:
                overrides["stream"] = True
            agent = resume_run(
                resume_path,
                api_key,
                limits=limits,
                model_overrides=overrides,
                ask_human=ask_human if human else None,
                context_overrides={"window_tokens": context_tokens} if context_tokens else None,
            )
        else:
            arm_opts = {
                **key_values(agent_opts, "--agent-opt"),
                **question_options(categories, plateau, repeats, spacing),
            }
            if agent_cmd:
                if arm not in ("kernelseek", "agent-cmd"):
                    raise RunSetupError(f"--agent-cmd runs the agent-cmd arm, not {arm}")
                arm, arm_opts["command"] = "agent-cmd", agent_cmd
            if arm != "agent-cmd":  # an agent command brings its own model and credentials
                if not model_name:
                    raise RunSetupError("--model is required (or --resume a trace)")
                if not api_key and not base_url:
                    raise RunSetupError("set OPENAI_API_KEY, or give --base-url for an endpoint that needs no key")
            cfg = RunConfig(
                arm=arm,
                arm_options=arm_opts,
                task=task,
                task_options=task_options(kernel, goal, task_opts),
                seed=seed,
                human=human,
            )
            cfg.model.name, cfg.model.base_url, cfg.model.temperature = model_name, base_url, temperature
            cfg.context.window_tokens = context_tokens
            if max_attempts is not None:
                cfg.model.max_attempts = max_attempts
            cfg.model.retry_budget_s = retry_budget
            if price:
                cfg.model.price_input_per_mtok, cfg.model.price_output_per_mtok = price
            cfg.model.price_cached_input_per_mtok = price_cached
            cfg.model.stream = bool(stream)
            for k, v in limits.items():
                setattr(cfg.limits, k, v)
            if bank:
                cfg.questions.bank_path = str(bank.resolve())
            if sandbox:
                cfg.tools.sandbox = sandbox
            agent = new_run(cfg, trace_path, api_key, ask_human=ask_human if human else None)
    except (RunSetupError, BankError, KeyError, ValueError, FileNotFoundError, ImportError, RuntimeError) as e:
        fail(e.args[0] if isinstance(e, KeyError) and e.args else str(e), USAGE)

    ctx = agent.ctx
    console.print(f"trace: {ctx.trace.path}  workspace: {ctx.workspace.root}  sandbox: {ctx.workspace.sandbox_detail}")
    if not ctx.workspace.sandboxed:
        console.print(
            "warning: no sandbox: the shell and the candidates can read and write wherever you can "
            "(docs/threat-model.md)"
        )
    view = LiveView(console, ctx.config.limits, enabled=not no_live and console.is_terminal)
    ctx.trace.listeners.append(view.on_event)
    if not view.enabled:
        ctx.trace.listeners.append(lambda ev: _plain(console, ev))

    def on_term(signum, frame):  # a polite kill ends the run like Ctrl-C: traced, resumable
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    with view:
        result = agent.run()
    console.print(
        f"exit: {result.exit_reason}" + (f" ({result.limit})" if result.limit else "") + f": {result.message}"
    )
    best = result.best
    console.print(
        f"best: {best['geomean']:.3f}x (evaluation {best['eval_index']}, blob {best['candidate_sha256'][:12]})"
        if best
        else "best: no correct evaluation"
    )
    t = result.totals
    console.print(
        f"{t['steps']} steps, {t['evals']} evaluations, {t['total_tokens']} tokens, "
        f"{t['wall_s']:.0f}s; goal {'met' if result.goal_met else 'not met'}; trace {result.trace_path}"
    )
    code = run_exit_code(result)
    if code == ENDPOINT:
        console.print(
            f"error: the model endpoint ({ctx.config.model.base_url or 'the client default'}) failed: no verdict "
            f"on the agent. A call is tried at most --max-attempts times ({ctx.config.model.max_attempts} here), "
            "with backoff between tries"
            + (
                f", for at most --retry-budget {ctx.config.model.retry_budget_s:g} s"
                if ctx.config.model.retry_budget_s
                else ""
            )
            + f"; resume with --resume {result.trace_path} once it answers",
            markup=False,
            highlight=False,
        )
    elif code in (EVALUATOR, NO_GPU) and not result.goal_met:
        console.print(f"error: {result.message}", markup=False, highlight=False)
    sys.exit(code)


def run_exit_code(result) -> int:
    """The run's exit code: 0 goal met, 1 goal not met or the evaluator tampered with, 3 no suitable
    GPU for the evaluator, 6 the evaluator's own failure, 7 the model endpoint failed."""
    if result.exit_reason == "harness_tampered":
        return FAIL
    if result.goal_met:
        return OK
    status = (result.details or {}).get("evaluator_status")
    if status:
        return NO_GPU if status == "no_gpu" else EVALUATOR
    if result.exit_reason == "model_error":
        return ENDPOINT
    return FAIL


def _plain(console, ev: dict) -> None:
    from ..contracts.traces import timeline_lines

    if ev["type"] in ("llm_call", "harness_eval", "question", "retry", "exit", "resume", "context", "invocation"):
        for line in timeline_lines([ev]):
            console.print(line, markup=False, highlight=False)


COMMANDS = (run_cmd,)
