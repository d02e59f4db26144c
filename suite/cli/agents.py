"""`kernelseek-suite run`: one agent run, a thin layer over the agents library."""

from __future__ import annotations

import sys

import click

from ..contracts.exitcodes import ENDPOINT, EVALUATOR, FAIL, NO_GPU, OK, USAGE
from . import termination
from .common import EXISTING_FILE, FILE, Groups, RunOptions, console, fail, key_values, shared_options

# the help `run` gives the shared options where it says more than `compare`
RUN_HELP = {
    "--base-url": "an OpenAI-compatible endpoint, e.g. http://localhost:8000/v1",
    "--max-steps": "model calls (default 200)",
    "--max-evals": "harness evaluations",
    "--max-wall": "minutes of wall time",
    "--max-tokens": "prompt + completion tokens",
    "--max-cost": "USD, when the endpoint reports or --price gives a cost",
    "--kernel": "the starting kernel (default: the task's own)",
    "--goal": "the geomean speed-up the goal asks for",
    "--task-opt": "a task option (repeatable)",
    "--categories": "question categories, comma-separated (kernelseek, agent-cmd)",
    "--sandbox": "write protection for the shell tool (default auto)",
}


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
    '"codex exec --sandbox danger-full-access" or "claude -p --permission-mode acceptEdits"',
)
@click.option("--task", default="fa-fwd-sm90", show_default=True, help="fa-fwd-sm90 or cpu-attn")
@shared_options(Groups.MODEL_ENDPOINT, RUN_HELP)
@shared_options(Groups.LIMITS, RUN_HELP)
@shared_options(Groups.MODEL_PRICING)
@click.option("--human", is_flag=True, help="a person at the terminal types the questions")
@click.option(
    "--trace", "trace_path", type=FILE, default=None, help="where the trace goes (default runs/<run id>/trace.jsonl)"
)
@click.option(
    "--resume", "resume_path", type=EXISTING_FILE, default=None, help="continue the run recorded in this trace"
)
@shared_options(Groups.TASK_INPUTS, RUN_HELP)
@click.option("--agent-opt", "agent_opts", multiple=True, metavar="KEY=VALUE", help="an arm option (repeatable)")
@shared_options(Groups.MODEL_CALLS)
@shared_options(Groups.QUESTIONS, RUN_HELP)
@click.option("--seed", type=int, default=None)
@click.option("--bank", type=EXISTING_FILE, default=None, help="the question bank (default bank/questions.yaml)")
@shared_options(Groups.SANDBOX, RUN_HELP)
@click.option("--no-live", is_flag=True, help="no live view, only the events")
def run_cmd(arm, agent_cmd, task, human, trace_path, resume_path, agent_opts, seed, bank, sandbox, no_live, **grouped):
    """Run an agent on a task against an OpenAI-compatible endpoint (API key from OPENAI_API_KEY), or an
    existing coding-agent command in the harness (--agent-cmd)."""
    from ..agents.bank import BankError
    from ..agents.live import LiveView
    from ..agents.runner import RunSetupError, api_key_from_env, new_run, resume_run

    api_key = api_key_from_env()
    shared = RunOptions.of(grouped)
    model, limits = shared.model, shared.limits.limits()
    asker = _PersonAsks() if human else None
    try:
        if resume_path:
            agent = resume_run(
                resume_path,
                api_key,
                limits=limits,
                model_overrides=model.resume_overrides(),
                ask_human=asker,
                context_overrides={"window_tokens": model.context_tokens} if model.context_tokens else None,
            )
        else:
            arm_opts = {**key_values(agent_opts, "--agent-opt"), **shared.questions.arm_options()}
            arm = _arm(arm, agent_cmd, arm_opts)
            _check_endpoint(arm, shared, api_key)
            cfg = _new_config(arm, arm_opts, task, seed, human, shared)
            if bank:
                cfg.questions.bank_path = str(bank.resolve())
            if sandbox:
                cfg.tools.sandbox = sandbox
            agent = new_run(cfg, trace_path, api_key, ask_human=asker)
    except (RunSetupError, BankError, KeyError, ValueError, FileNotFoundError, ImportError, RuntimeError) as e:
        fail(e.args[0] if isinstance(e, KeyError) and e.args else str(e), USAGE)

    ctx = agent.ctx
    _say_where(ctx)
    view = LiveView(console, ctx.config.limits, enabled=not no_live and console.is_terminal)
    if asker:
        asker.view = view
    ctx.trace.listeners.append(view.on_event)
    if not view.enabled:
        ctx.trace.listeners.append(lambda ev: _plain(console, ev))

    def on_term(signum, frame):  # a polite kill ends the run like Ctrl-C: traced, resumable
        raise KeyboardInterrupt

    termination.on_sigterm(on_term)
    with view:
        result = agent.run()
    sys.exit(_report(result, ctx.config.model))


class _PersonAsks:
    """A person at the terminal types the questions; the live view pauses meanwhile."""

    view = None  # the run's LiveView, once it has one

    def __call__(self, decision, suggestion):
        self.view.pause()
        try:
            console.print(f"\n[bold]decision point: {decision.trigger}[/]  {decision.evidence}")
            if suggestion:
                console.print(f"bank suggests ({suggestion.category}, {suggestion.id}): {suggestion.text}")
            return click.prompt("your question (Enter takes the suggestion)", default="", show_default=False, err=True)
        finally:
            self.view.unpause()


def _arm(arm: str, agent_cmd: str | None, arm_opts: dict) -> str:
    """The arm to run: --agent-cmd runs the agent-cmd arm with that command (put into `arm_opts`)."""
    from ..agents.runner import RunSetupError

    if not agent_cmd:
        return arm
    if arm not in ("kernelseek", "agent-cmd"):
        raise RunSetupError(f"--agent-cmd runs the agent-cmd arm, not {arm}")
    arm_opts["command"] = agent_cmd
    return "agent-cmd"


def _check_endpoint(arm: str, shared: RunOptions, api_key: str | None) -> None:
    """A model and a way to reach it, unless an agent command brings its own model and credentials."""
    from ..agents.runner import RunSetupError

    model = shared.model
    if arm == "agent-cmd":
        return
    if not model.model_name:
        raise RunSetupError("--model is required (or --resume a trace)")
    if not api_key and not model.base_url:
        raise RunSetupError("set OPENAI_API_KEY, or give --base-url for an endpoint that needs no key")


def _new_config(arm, arm_opts, task, seed, human, shared: RunOptions):
    from ..agents.config import RunConfig

    options = shared.task.options()
    cfg = RunConfig(arm=arm, arm_options=arm_opts, task=task, task_options=options, seed=seed, human=human)
    shared.model.configure(cfg)
    for k, v in shared.limits.limits().items():
        setattr(cfg.limits, k, v)
    return cfg


def _say_where(ctx) -> None:
    console.print(f"trace: {ctx.trace.path}  workspace: {ctx.workspace.root}  sandbox: {ctx.workspace.sandbox_detail}")
    if not ctx.workspace.sandboxed:
        console.print(
            "warning: no sandbox: the shell and the candidates can read and write wherever you can "
            "(docs/threat-model.md)"
        )


def _report(result, model_config) -> int:
    """How the run ended, on the console; its exit code."""
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
            f"error: the model endpoint ({model_config.base_url or 'the client default'}) failed: no verdict "
            f"on the agent. A call is tried at most --max-attempts times ({model_config.max_attempts} here), "
            "with backoff between tries"
            + (f", for at most --retry-budget {model_config.retry_budget_s:g} s" if model_config.retry_budget_s else "")
            + f"; resume with --resume {result.trace_path} once it answers",
            markup=False,
            highlight=False,
        )
    elif code in (EVALUATOR, NO_GPU) and not result.goal_met:
        console.print(f"error: {result.message}", markup=False, highlight=False)
    return code


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
