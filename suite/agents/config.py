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
    base_url: str | None = None  # None: the client's default (api.openai.com)
    temperature: float | None = None  # None: the endpoint's default
    top_p: float | None = None
    max_output_tokens: int | None = None
    seed: int | None = None  # sent to endpoints that accept one
    timeout_s: float = 600.0  # one request
    max_attempts: int = 6  # per model call, first try included
    retry_budget_s: float | None = None  # seconds one model call may spend failing and waiting (None: no cap)
    backoff_initial_s: float = 2.0
    backoff_max_s: float = 60.0
    # USD per million tokens, used when the endpoint does not report a cost itself
    price_input_per_mtok: float | None = None
    price_output_per_mtok: float | None = None
    # USD per million prompt tokens served from the provider's cache (usage.prompt_tokens_details.
    # cached_tokens); None: the input price (no discount assumed)
    price_cached_input_per_mtok: float | None = None
    # the name of the output-token cap: max_tokens, max_completion_tokens (OpenAI's reasoning models,
    # which also take no temperature or top_p), or None: chosen from the model's name
    token_param: str | None = None
    stream: bool = False  # server-sent events: the time-out applies between chunks, not to the whole answer


@dataclass
class Limits:
    """Every limit is checked before each model call; the wall limit also between retries, before each
    tool call, and as the shell's deadline. None means no limit."""

    max_steps: int | None = 200  # model calls
    max_tokens: int | None = None  # prompt + completion tokens, all calls
    max_cost: float | None = None  # USD, when a cost is known
    max_wall_s: float | None = None  # wall time of the run, resumed sessions included
    max_evals: int | None = None  # harness evaluations


@dataclass
class ContextConfig:
    """Keeping the conversation inside the model's context window (compaction.py)."""

    window_tokens: int | None = None  # None: the endpoint's, where its model list says it; else learnt
    # from the first request it refuses as too long
    reserve_tokens: int = 4096  # left for the answer (max_output_tokens when that is set)
    compact_at: float = 0.85  # compact when a request would fill this share of the room ...
    compact_to: float = 0.6  # ... down to this share
    keep_recent_turns: int = 3  # the latest steps stay whole as long as anything else can go
    chars_per_token: float = 3.5  # the estimate until the endpoint reports a prompt's tokens


@dataclass
class ToolsConfig:
    shell_timeout_s: float = 300.0  # default per command; the model may ask for less or more
    shell_max_timeout_s: float = 1800.0
    max_output_chars: int = 12_000  # longer tool output is elided in the middle
    view_max_lines: int = 400
    sandbox: str = "auto"  # auto | landlock | none (see workspace.py)
    eval_timeout_s: float = 3600.0
    keep_workspace: bool = False  # leave the workspace folder after the run (the trace keeps its files)


# What a claim that the kernel is at a limit looks like (decisions.claimed_limit applies them to one
# sentence at a time and drops a match that is denied, asked, conditional or a possibility to test).
# A pattern may name the words that make the claim, (?P<claim>...): the match's words before them are
# checked for a denial too ("is not memory-bound").
_RESOURCE = (
    r"(?:(?:memory |dram |hbm |l2 )?bandwidth|global[- ]memory|memory|dram|hbm|l2|compute|(?:the )?hardware|"
    r"(?:the )?gpu|tensor[- ]cores?|(?:wgmma|mma|gemm) throughput|mufu|sfu|exp\w*|latency|"
    r"instruction (?:issue|throughput)|issue rate|flops|math throughput|launch overhead|(?:the )?roofline)"
)
_BOUND_KIND = (
    r"(?:memory|compute|bandwidth|latency|dram|hbm|l2|math|instruction(?:[- ]issue)?|issue|mufu|sfu|"
    r"tensor[- ]core|throughput|launch|occupancy|register|hardware|silicon|device|gpu)"
)
_LIMIT_NOUN = r"(?:limits?|ceilings?|peak|roofline|maximum|max|speed[- ]of[- ]light|sol|wall|minimum|floor)"
# the machine and its parts, as the subject of a claim ("the GPU is the limiting factor")
_MACHINE = (
    r"(?:hardware|silicon|gpu|device|chip|card|memory(?: system)?|dram|hbm|bandwidth|sms?|tensor[- ]cores?|"
    r"units?|pipes?|pipelines?|warps?|alus?|fmas?)"
)
_NEW_MACHINE = r"(?:new|faster|better|different|bigger|newer)\s+(?:hardware|gpu|card|device|chip|silicon|architecture)"
_LITTLE = r"(?:negligible|marginal|minimal|insignificant|tiny|minor|diminishing)"
_LIMIT_ADJ = (
    r"(?:(?:theoretical|hardware|practical|physical|fundamental|hard|memory|bandwidth|compute|achievable|"
    r"attainable|tensor[- ]core|hbm|dram)\s+)*"
)
DEFAULT_CLAIMED_LIMIT_PATTERNS = (
    # at, near or against a limit: "hit the roofline", "close to peak", "within 3% of the roofline"
    r"\b(?:at|near|nearly at|close to|approaching|within \d+(?:\.\d+)?\s*%\s*of|reach(?:ed|es|ing)?|hit(?:s|ting)?|"
    r"achiev(?:ed|es|ing)|(?:up )?against|sits? at|plateaued at)\s+(?:the\s+|its\s+|our\s+|a\s+)?"
    + _LIMIT_ADJ
    + _LIMIT_NOUN
    + r"\b",
    # a high share of a peak: "at 95% of peak bandwidth" (a low share is the opposite of a claim)
    r"\b(?:[89]\d|100)(?:\.\d+)?\s*%\s*of\s+(?:the\s+)?"
    + _LIMIT_ADJ
    + r"(?:peak|roofline|bandwidth|speed[- ]of[- ]light)",
    # "memory-bound", "compute limited", said of something ("is", "are", "seems", ...)
    r"(?:\b(?:is|are|was|were|be|been|being|becomes?|became|remains?|stays?|seems?|looks?|appears?|now|still)\b|'s\b|"
    r"'re\b)[^,;:.!?]*?(?P<claim>\b" + _BOUND_KIND + r"[- ](?:bound|limited)\b)",
    # "limited by memory bandwidth", "bottlenecked by HBM" (but not "the loop is bound by n")
    r"\b(?:bound|limited|bottlenecked|capped|throttled|gated|constrained)\s+(?:by|on)\s+(?:the\s+|our\s+|its\s+)?"
    + _RESOURCE
    + r"\b",
    # "is near-optimal", "already optimal"
    r"\b(?:near|nearly|close to|essentially|basically|practically|virtually|already|about as)[- ]optimal\b|"
    r"(?:\b(?:is|are)\b|'s\b|'re\b)\s+(?:now\s+|already\s+)*optimal\b",
    # it cannot be made faster
    r"\b(?:can ?not|can't|could ?not|couldn't|won't|will not|would not|wouldn't|unable to|impossible to|no way to)\s+"
    r"(?:be\s+)?(?:further\s+|any\s+)?(?:improved?|optimi[sz]ed?|made (?:any )?faster|sped up|speed (?:it |this )?up|"
    r"(?:go|get|run) (?:any )?faster|make (?:it|this|the kernel) (?:any )?faster|squeeze|do (?:any )?better|"
    r"push (?:it |this )?(?:any )?further|gain (?:any )?more)",
    r"\b(?:don't|do not) (?:think|believe|see how) (?:it|this|the kernel|we) can "
    r"(?:be made |get |go |run )?(?:any )?faster",
    r"\b(?:speed-?ups?|improvements?|gains?|(?:going |getting |running )?faster|optimi[sz]ations?)\b[^.;,!?]{0,30}?"
    r"\b(?:(?:is|are)(?:n't|\s+not)\s+(?:simply\s+|just\s+)?(?:possible|feasible)|(?:is|are)\s+(?:simply\s+|just\s+)?"
    r"(?:impossible|infeasible))\b",
    # no room left
    r"\b(?:no|little|not much|hardly any)\s+(?:(?:further|more|remaining|additional)\s+)?headroom\b|"
    r"\b(?:no|little|not much|hardly any)\s+(?:further|more|remaining|additional)\s+"
    r"(?:room|improvements?|speed-?ups?|gains?|performance)\b|"
    r"\bno (?:room|headroom) (?:left|remaining)\b|"
    r"\bno room (?:left )?for (?:further |more )?(?:improvement|optimi[sz]ation|speed-?ups?)\b|"
    r"\b(?:nothing|little) (?:left|more|else) to (?:gain|optimi[sz]e|squeeze|improve)\b|"
    r"\bnothing (?:more|else|further) (?:can|could) be (?:done|optimi[sz]ed|improved|gained)\b",
    # saturated: "the tensor cores are saturated", "saturating HBM bandwidth" (not "to saturate")
    r"(?:\b(?:is|are|been|be|has|have|had|now|already|fully|completely|remains?)\b|'s\b|'re\b|'ve\b)\s+"
    r"(?:(?:fully|completely|already|now)\s+)*saturat(?:ed|ing)\b|"
    r"\bsaturat(?:ed|ing)\s+(?:the\s+)?(?:memory|dram|hbm|l2|bandwidth|tensor[- ]cores?|compute|sms?|gpu)\b",
    r"\b(?:fully|completely|maximally)\s+(?:utili[sz](?:ed|ing)|using)\s+(?:the\s+)?"
    r"(?:memory bandwidth|bandwidth|tensor[- ]cores?|compute|hardware|gpu|hbm|sms?)\b",
    r"(?:\b(?:is|was)\b|'s\b)\s+(?:a|the)\s+(?:(?:fundamental|hard|physical|hardware|practical|theoretical)\s+)+"
    r"(?:limit|ceiling|barrier|wall|maximum|peak)\b",
    r"\bmax(?:ed|ing)? out\b",
    r"\bdiminishing returns\b",
    r"\bas (?:fast|good|efficient|optimi[sz]ed) as (?:it|this|the kernel|we|one) (?:can|could|will|is going to) "
    r"(?:get|go|be)\b|\bas good as it gets\b",
    r"\b(?:the )?best (?:we|one|anyone) (?:can|could) (?:do|get|achieve|hope for)\b",
    r"\b(?:exhausted|run out of|ran out of|out of)\s+(?:all\s+)?(?:the\s+|my\s+|our\s+)?"
    r"(?:optimi[sz]ations?|ideas|options|avenues|tricks)\b",
    # physics: "physics puts a floor on it", "we're fighting physics", "physically can't go faster"
    r"\b(?:(?:the\s+)?laws? of physics|physics)\b[^.;!?]*?\b(?:floor|limits?|caps?|bounds?|won't|will not|"
    r"doesn't|does not|allows?|lets?|dictates?)\b(?![- ](?:tiles?|layout))|"
    r"\b(?:fighting|against|dictated by|limited by|bound by|set by)\s+(?:the\s+)?(?:laws of\s+)?physics\b|"
    r"\bphysically\b[^.;!?]*?\b(?:can't|cannot|can not|won't|impossible|no way)\b",
    # Amdahl's law: the part that cannot be sped up caps the rest
    r"\bamdahl\b[^.;!?]*?\b(?:caps?|capped|bounds?|bounded|limits?|limited|out of reach|ceiling|no (?:more|further))\b|"
    r"\b(?:by|according to|per)\s+amdahl\b",
    # "the best achievable", "the best possible time", said of what we have
    r"\b(?:the\s+|about\s+the\s+)?best\s+(?:achievable|attainable|possible)\b",
    # "as close to peak as it's going to get", "as close to the roofline as it can be"
    r"\bas (?:fast|good|efficient|optimi[sz]ed|close|near)\b[^.;,!?]{0,40}?\bas (?:it|this|the kernel|we|one|they)"
    r"(?:'s|'re| is| are)?\s+(?:can|could|will|is going to|are going to|going to|gonna)\s+(?:get|go|be)\b",
    # pegged, flat out, busy every cycle, fully used
    r"(?:\b(?:is|are|was|were)\b|'s\b|'re\b)\s+(?:now\s+|already\s+)?pegged\b|"
    r"\b(?:running|runs|run|working|works)\s+(?:at\s+)?(?:full tilt|flat out|full speed|full throttle)\b|"
    r"\b(?:fully|completely|constantly)\s+busy\b|\bbusy (?:every|each|on every) cycle\b|"
    r"\b" + _MACHINE + r"\s+(?:is|are)\s+(?:now\s+|already\s+)?(?:fully|completely|maximally)\s+"
    r"(?:used|utili[sz]ed|occupied|busy|saturated)\b",
    # already balanced: nothing left to redistribute
    r"\b(?:already|perfectly|fully|well)(?:\s+(?:perfectly|fully|well))?[- ](?:load[- ])?balanced\b",
    # the machine, not the code, limits it
    r"\b" + _MACHINE + r"(?:\s+itself)?\s+(?:is|are)\s+(?:now\s+)?(?:the\s+)?"
    r"(?:bottleneck|limiting (?:factor|resource))\b|"
    r"\b(?:code|kernel|software|implementation)\s+is\s+no\s+longer\s+the\s+(?:bottleneck|limiting factor)\b",
    # no slack, zero headroom, nothing left on the table
    r"\b(?:no|zero|little|hardly any)\s+(?:\w+\s+)?(?:slack|headroom)\b(?!\s+(?:for|to)\s+(?:doubt|worry))|"
    r"\bnothing (?:left|more) on the table\b",
    # what is left is noise, negligible or marginal
    r"\b(?:gains?|improvements?|speed-?ups?|differences?)\b[^.;!?]{0,40}?\b(?:smaller than|below|within|lost in)\s+"
    r"(?:the\s+)?(?:run-to-run\s+|measurement\s+|timing\s+)?noise\b|"
    r"\b(?:further|additional|remaining|more|from here(?: on| out)?|any (?:more|further))\b[^.;!?]{0,40}?\b"
    + _LITTLE
    + r"\b(?!\s+so\b)",
    # only other hardware would help
    r"\b(?:only|nothing (?:short of|but))\s+(?:a\s+)?" + _NEW_MACHINE + r"\b|"
    r"\b(?:need|needs|require|requires|take|takes)\s+(?:a\s+)?" + _NEW_MACHINE + r"\b",
    # everything extracted
    r"\b(?:extract(?:s|ed|ing)?|squeez(?:e|ed|es|ing)|wrung|wring)\s+(?:out\s+)?"
    r"(?:all|everything|every (?:last )?\w+)\b",
    r"\bno amount of\b[^.;!?]{0,40}?\b(?:will|would|can|could)\b",
)


@dataclass
class QuestionConfig:
    """The KernelSeek arm's decision points and how questions are chosen."""

    bank_path: str | None = None  # None: bank/questions.yaml of the repository
    categories: tuple[str, ...] = ("layer-shift", "limit-rejection")  # "information" for comparison runs
    plateau_evals: int = 4  # evaluations without a new best
    new_best_min_gain: float = 0.01  # a new best beats the old one by this fraction
    repeated_failure: int = 3  # the same failure this many times in a row
    layer_dwell_steps: int = 8  # consecutive steps in one layer
    min_steps_between: int = 2  # between questions (an early stop is always answered)
    no_repeat_within: int = 8  # a bank question is not asked again within this many
    claimed_limit_patterns: tuple[str, ...] = DEFAULT_CLAIMED_LIMIT_PATTERNS
    # a claimed limit is decided by the run's own model (a short classification call, its tokens counted
    # in the run's totals); the patterns above decide without one, or when it cannot say
    classify_claims: bool = True


@dataclass
class RunConfig:
    arm: str = "kernelseek"
    label: str | None = None  # the arm's name in a comparison, when not the agent's
    arm_options: dict[str, Any] = field(default_factory=dict)  # read by the arm's factory
    task: str = "fa-fwd-sm90"
    task_options: dict[str, Any] = field(default_factory=dict)
    model: ModelConfig = field(default_factory=ModelConfig)
    limits: Limits = field(default_factory=Limits)
    tools: ToolsConfig = field(default_factory=ToolsConfig)
    context: ContextConfig = field(default_factory=ContextConfig)
    questions: QuestionConfig = field(default_factory=QuestionConfig)
    seed: int | None = None  # None: a fresh one, recorded
    human: bool = False  # questions typed at the terminal
    system_prompt: str = SYSTEM_PROMPT
    task_prompt: str = TASK_PROMPT

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> RunConfig:
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
