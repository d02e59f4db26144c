"""The agents' settings in one place: a typed config per component, the prompts, and the run config
that holds them all (recorded whole in the trace's `run_start`)."""
from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass, field
from typing import Any

SYSTEM_PROMPT = """\
You are a performance engineer working alone in a workspace: a folder that holds the file you are \
improving. You act only through the tools you are given:
- shell: run a bash command with the workspace as the current directory (it may time out; long \
output is cut in the middle);
- view_file: read a file of the workspace, with line numbers;
- edit_file: replace one unique string in a file, or write a whole file;
- evaluate: run the task's evaluator on the workspace's kernel; it checks correctness on every \
scenario and reports the speed against the baseline. Evaluations are limited: use them when a \
change is ready.
Paths are relative to the workspace; files outside it are read-only to you.
Work step by step: look, change, evaluate, learn from the result. When you believe the work is \
finished, reply with a short summary and no tool call."""

TASK_PROMPT = """\
{description}

Goal: {goal}
The kernel to improve is `{kernel}` in the workspace. Budget: {budget}."""


@dataclass
class ModelConfig:
    """The chat-completions endpoint and sampling. The API key is never part of the config: it is
    read from OPENAI_API_KEY when the client is made."""
    name: str = ""
    base_url: str | None = None          # None: the client's default (api.openai.com)
    temperature: float | None = None     # None: the endpoint's default
    top_p: float | None = None
    max_output_tokens: int | None = None
    seed: int | None = None              # sent to endpoints that accept one
    timeout_s: float = 600.0             # one request
    max_attempts: int = 6                # per model call, first try included
    retry_budget_s: float | None = None  # seconds one model call may spend failing and waiting (None: no cap)
    backoff_initial_s: float = 2.0
    backoff_max_s: float = 60.0
    # USD per million tokens, used when the endpoint does not report a cost itself
    price_input_per_mtok: float | None = None
    price_output_per_mtok: float | None = None


@dataclass
class Limits:
    """Every limit is checked before each model call; the wall limit also between retries, before each
    tool call, and as the shell's deadline. None means no limit."""
    max_steps: int | None = 200          # model calls
    max_tokens: int | None = None        # prompt + completion tokens, all calls
    max_cost: float | None = None        # USD, when a cost is known
    max_wall_s: float | None = None      # wall time of the run, resumed sessions included
    max_evals: int | None = None         # harness evaluations


@dataclass
class ToolsConfig:
    shell_timeout_s: float = 300.0       # default per command; the model may ask for less or more
    shell_max_timeout_s: float = 1800.0
    max_output_chars: int = 12_000       # longer tool output is elided in the middle
    view_max_lines: int = 400
    sandbox: str = "auto"                # auto | landlock | none (see workspace.py)
    eval_timeout_s: float = 3600.0
    keep_workspace: bool = False         # leave the workspace folder after the run (the trace keeps its files)


DEFAULT_CLAIMED_LIMIT_PATTERNS = (
    r"theoretical (limit|maximum|peak|bound)",
    r"(cannot|can't|can not|could not|couldn't) be (improved|optimi[sz]ed|made faster|sped up)",
    r"no (further|more) (room|improvement|speed-?up|gains?)",
    r"\b(is|are|remains?) (bound|limited) by\b",
    r"\b(memory|compute|bandwidth|latency|launch|math|instruction)[- ](bound|limited)\b",
    r"\bsaturat(ed|es|ing)\b",
    r"\bimpossible\b",
    r"\bat (the|its) (hardware |practical |physical )?(limit|ceiling|peak)\b",
    r"(fundamental|hard|physical) (limit|ceiling|barrier)",
    r"\bdiminishing returns\b",
    r"\bas fast as (it|this) (can|will) (get|go|be)\b",
)


@dataclass
class QuestionConfig:
    """The KernelSeek arm's decision points and how questions are chosen."""
    bank_path: str | None = None                 # None: bank/questions.yaml of the repository
    categories: tuple[str, ...] = ("layer-shift", "limit-rejection")   # "information" for comparison runs
    plateau_evals: int = 4                       # evaluations without a new best
    new_best_min_gain: float = 0.01              # a new best beats the old one by this fraction
    repeated_failure: int = 3                    # the same failure this many times in a row
    layer_dwell_steps: int = 8                   # consecutive steps in one layer
    min_steps_between: int = 2                   # between questions (an early stop is always answered)
    no_repeat_within: int = 8                    # a bank question is not asked again within this many
    claimed_limit_patterns: tuple[str, ...] = DEFAULT_CLAIMED_LIMIT_PATTERNS


@dataclass
class RunConfig:
    arm: str = "kernelseek"
    arm_options: dict[str, Any] = field(default_factory=dict)     # read by the arm's factory
    task: str = "fa-fwd-sm90"
    task_options: dict[str, Any] = field(default_factory=dict)
    model: ModelConfig = field(default_factory=ModelConfig)
    limits: Limits = field(default_factory=Limits)
    tools: ToolsConfig = field(default_factory=ToolsConfig)
    questions: QuestionConfig = field(default_factory=QuestionConfig)
    seed: int | None = None                       # None: a fresh one, recorded
    human: bool = False                           # questions typed at the terminal
    system_prompt: str = SYSTEM_PROMPT
    task_prompt: str = TASK_PROMPT

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "RunConfig":
        return _build(cls, d)


def _build(cls, d: dict):
    """Nested dataclasses from a dict (the inverse of asdict); unknown keys are an error."""
    names = {f.name: f for f in dataclasses.fields(cls)}
    unknown = set(d) - set(names)
    if unknown:
        raise ValueError(f"{cls.__name__}: unknown field(s) {sorted(unknown)}")
    kw = {}
    for k, v in d.items():
        default = names[k].default_factory() if names[k].default_factory is not dataclasses.MISSING else None
        if dataclasses.is_dataclass(default) and isinstance(v, dict):
            kw[k] = _build(type(default), v)
        elif isinstance(names[k].default, tuple) and isinstance(v, list):
            kw[k] = tuple(v)
        else:
            kw[k] = v
    return cls(**kw)
