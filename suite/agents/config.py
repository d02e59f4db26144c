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


# What a claim that the kernel is at a limit looks like: the structures of such a claim, each a pattern
# (decisions.claimed_limit applies them to one sentence at a time and drops a match that is denied,
# asked, conditional, a goal, about another kernel or an earlier version, taken back, or followed by a
# plan to go on optimizing). A pattern may name the words that make the claim, (?P<claim>...): the
# match's words before them are checked for a denial too ("is not memory-bound"). A match whose numbers
# put it below 85% of a limit claims nothing (decisions.HIGH_SHARE); a pattern names them: (?P<pct>...)
# a percentage of the limit, (?P<frac>...) the digits of a fraction of it (0.98), (?P<gap>...) the
# distance to it in percent, (?P<got>...) a rate against (?P<peak>...) the limit's, (?P<floor>...) the
# limit's time against (?P<took>...) the kernel's; a name may end in a digit, to be used again.

# a resource that can bound a kernel ("limited by HBM bandwidth"), and not a fixable inefficiency
# ("limited by L2 misses", "bound by bank conflicts")
_RESOURCE = (
    r"(?:(?:memory |dram |hbm |l2 |global[- ]memory )?bandwidth|global[- ]memory|memory(?: system| subsystem)?|"
    r"dram|hbm|l2|compute|(?:the )?hardware|(?:the )?silicon|(?:the )?device|(?:the )?gpu|(?:the )?physics|"
    r"tensor[- ]cores?|(?:wgmma|mma|gemm) throughput|mufu|sfu|exp\w*|latency|instruction (?:issue|throughput)|"
    r"issue rate|flops|math throughput|launch overhead|(?:the )?roofline|(?:the )?serial (?:part|fraction|portion))"
    r"(?!\s+(?:misses|miss rate|bank conflicts|conflicts|stalls|spills|divergence|waits|accesses pattern))"
)
_BOUND_KIND = (
    r"(?:memory|compute|bandwidth|latency|dram|hbm|l2|math|instruction(?:[- ]issue)?|issue|mufu|sfu|"
    r"tensor[- ]core|throughput|launch|occupancy|register|hardware|silicon|device|gpu|amdahl|physics|io|i/o|bw|mem|"
    r"roofline)"
)
# what a kernel is at when it can go no further; a limit of the configuration ("the register limit",
# "the time limit", "--limit") is not one of them
_LIMIT_NOUN = (
    r"(?<![-\w])(?:limits?|ceilings?|peak|roofline|roof|maximum|max|speed[- ]of[- ]light|sol|wall|(?<!at )minimum|"
    r"floor|bound|cap|asymptote|optimum|frontier|spec|line rate|wire ?speed|maxima|minima|"
    r"(?:hardware|device|gpu|card|chip|hbm|dram)'s (?:\w+ )?(?:bandwidth|throughput|rate|maximum|limit|peak)|"
    r"full (?:\w+ )?(?:speed|bandwidth|throughput|rate|"
    r"capacity|tilt)|"
    r"capacity|saturation|boundary|end of the (?:road|line)|end of (?:useful|meaningful|productive|"
    r"further) (?:optimi\w+|"
    r"tuning|improvements?|work|gains)|(?:theoretical|achievable|attainable|practical) (?:best|"
    r"optimum)|(?:rated|nominal|spec(?:ified)?|theoretical|maximum|max) "
    r"(?:bandwidth|throughput|speed|rate|flops))\b"
    r"(?!\s+(?:occupancy|memory usage|usage|register\w*|shared memory|smem|allocation|temperature|power)\b)"
)
_LIMIT_ADJ = (
    r"(?:(?![\w-]*(?:register|shared|smem|time|step|token|rate|recursion|size|thread|block|grid|launch|stack|"
    r"file|line|loop|retry|budget|eval|iteration|context|occupancy|usage|spill|half|third|quarter|fraction|unroll|"
    r"compil|cache|recursion|depth|queue)|of\s)"
    r"[\w./'-]+\s+){0,3}?"
)
_DET = r"(?:(?:the|its|our|a|an|this|that|what)\s+)?"
# the machine and its parts, as the subject of a claim ("the GPU is the limiting factor")
_MACHINE = (
    r"(?:hardware|silicon|gpu|device|chip|card|memory(?: system| subsystem| bus)?|dram|hbm|bandwidth|sms?|"
    r"tensor[- ]cores?|units?|pipes?|pipelines?|warps?|alus?|fmas?|bus|lsus?|mma pipe)"
)
_NEW_MACHINE = (
    r"(?:new|faster|better|different|bigger|newer|next-gen\w*)\s+(?:hardware|gpu|card|device|chip|silicon|"
    r"architecture|algorithm|hbm|memory|dram)"
)
_LITTLE = r"(?:negligible|marginal|minimal|insignificant|tiny|minor|diminishing|trivial)"
# a gain of performance, and what would give one
_GAIN = (
    r"(?:speed-?ups?|improvements?|gains?|performance|perf|optimi[sz]ations?|headroom|room|slack|upside|juice|"
    r"margin|potential|wins?|savings?|opportunit(?:y|ies)|ideas?|tricks?|options?|avenues?|levers?|daylight|"
    r"idle (?:slots?|cycles?)|speed|throughput|time to (?:gain|save)|progress|inefficienc(?:y|ies)|waste|"
    r"bottlenecks?)"
)
# a negation of ability or prospect ("can't", "won't", "no way to", "hard to imagine")
_CANNOT = (
    r"(?:can ?not|can't|could ?not|couldn't|won't|will not|wouldn't|would not|(?:is|are)(?:n't| not) going to|"
    r"not going to|unable to|impossible to|(?:there's |there is )?no way to|not possible to|no longer able to|"
    r"(?:can|could) no longer|(?:doesn't|does not) get|"
    r"never going to|(?:can't|cannot|couldn't|could not) seem to|(?:am|'m|is|are)(?:n't| not) able to|"
    r"hard to (?:imagine|see)|can't imagine|beyond (?:my|our) "
    r"(?:reach|ability)|(?:don't|do not|can't|cannot) see (?:how|where|any way))"
)
# a gain in any words: what a denied ability or prospect is about ("can't go any faster", "won't help",
# "won't go below 0.41 ms"); the words between may not be about measuring or building ("couldn't
# reproduce the speedup", "can't tell which is better")
_IMPROVE = (
    r"(?:faster|quicker|speedier|speed(?:[- ]?ups?)?|sped up|accelerat\w+|improv\w+|better|gains?|beat(?:en)?|"
    r"shrink|shorten\w*|shave\w*|squeez\w*|extract\w*|optimi[sz]\w*|(?:any|much|meaningfully|significantly|"
    r"noticeably|measurably|appreciably|materially) (?:lower|more)|more (?:performance|speed|throughput|bandwidth|"
    r"out of|from)|(?:go|get|drop|fall|push it|climb) (?:any )?(?:below|under|lower|higher)|help|helps|pay (?:off|"
    r"for itself)|matter|"
    r"compensate|budge|(?:more|any) fast|hide|(?:deliver|give|provide|offer) (?:any )?more|"
    r"move the needle|further|closer|parallel\w*|(?:any|much) harder|buy (?:us )?(?:anything|much|more))"
)
_NOT_ABOUT_SPEED = (
    r"(?!(?:tell|say|know|decide|judge|reproduce|replicate|confirm|verify|measure|explain|understand|compile|build|"
    r"test|trust|count|claim|attribute|report|launch|run it|use|be sure)\b)"
)
# faster, in any words ("any quicker", "meaningfully better", "more performance")
_FASTER = (
    r"(?:faster|quicker|speedier|further|(?:any|much|meaningfully|significantly|noticeably|measurably|"
    r"appreciably|materially) (?:better|lower|more)|more (?:performance|speed|throughput|bandwidth|work|out of|from)|"
    r"(?:get|go|do|be|run)\s+(?:any\s+|much\s+)?better|better than (?:this|that|now|it is|what we have)|"
    r"(?:any|much) harder)"
)
_WORDS = r"(?:[\w'/.-]+\s+)"  # a word and the space after it (a bounded run of them: {0,n}?)

DEFAULT_CLAIMED_LIMIT_PATTERNS = (
    # at, near or against a limit: "hit the roofline", "close to peak", "right up against the HBM wall",
    # "bottomed out at the bandwidth floor", "reached its performance ceiling"
    r"\b(?:at|near|nearly at|close to|right (?:at|on)|(?:(?:is|are|'s|'re|lies)\s+(?:\w+ly\s+|pretty much\s+)?|"
    r"squarely\s+)on|approaching|reach(?:ed|es|ing)?|hit(?:s|ting)?|"
    r"achiev(?:ed|es|ing)|(?:up |right up )?against|bumping (?:against|into|up against|(?:our |its |my )?heads? (?:on|"
    r"against))|ran into|run(?:ning)? into|"
    r"sits? (?:at|on)|sitting (?:at|on|right on)|plateaued (?:at|near)|topped out (?:at|near)|"
    r"bottomed out (?:at|near)|pinned (?:at|to)|stuck at|converged (?:on|to)|flush (?:with|against)|matching|"
    r"match(?:es)?|equals?|equal to|identical to|the same as|hugg(?:ing|s)|skimming|grazing|riding|touching|"
    r"scraping|brushing|kissing|pressed (?:up )?against|pressing (?:up )?against|peaks? at|delivering|delivers|"
    r"sustaining|sustains|giving|providing|"
    r"(?:at |reached |in )?parity with)\s+(?:(?!only\b)\w+ly\s+)?" + _DET + _LIMIT_ADJ + _LIMIT_NOUN,
    # "this is a hard limit of the architecture", "the practical maximum", "the limit."
    r"(?:\b(?:is|was|be|looks like|seems like|seems to be|appears to be|feels like)\b|'s\b)\s+(?:now\s+|already\s+|"
    r"\w+ly\s+|pretty much\s+|"
    r"simply\s+)*(?:a|the|its|our)\s+(?:(?:fundamental|hard|physical|hardware|practical|theoretical|architectural|"
    r"absolute|real|true|upper|performance|bandwidth|memory|compute)\s+)*" + _LIMIT_NOUN + r"(?=\s*(?:[.,;:!)\u2014]|"
    r"$|\s(?:of|for|given|here|now|with|in|at|on this|we)\b))",
    # a share of a limit, close to all of it: "at 95% of peak bandwidth", "0.98 of the roofline",
    # "99% utilization", "within 2% of the roofline", "1.5% off speed-of-light", "4.55 of 4.8 TB/s"
    r"(?<![\d.])(?P<pct>\d+(?:\.\d+)?)\s*(?:%|percent)\s*(?:of\s+" + _DET + _LIMIT_ADJ + r"(?:peak|roofline|roof|"
    r"bandwidth|speed[- ]of[- ]light|sol|theoretical|max(?:imum)?|hardware|limit|ceiling|spec|achievable|"
    r"attainable|possible|capacity|dram|hbm)|(?:utili[sz]ation|utili[sz]ed|busy|active|of sol|sol|of peak|peak))|"
    r"\b(?:utili[sz]ation|throughput|busy|active)\b[^.;,!?\d]{0,25}?(?<![\d.])(?P<pct2>\d+(?:\.\d+)?)\s*%|"
    r"\b(?:utili[sz]\w+|throughput|bandwidth|busy|active|pipes?|tensor[- ]cores?|dram|hbm|memory|sol|issue|sms?|units?|"
    r"running|runs|loads?)\b[^.;,!?]{0,30}?\bat\s+(?:essentially\s+|basically\s+|nearly\s+|almost\s+|roughly\s+|"
    r"about\s+|~\s*)?(?P<pct4>\d+(?:\.\d+)?)\s*%|"
    r"\b(?:sol|speed[- ]of[- ]light)(?:\s+[\w-]+)?\s*(?::|is|at|of)?\s*(?P<pct3>\d+(?:\.\d+)?)\s*%|"
    r"(?<![\d.])0?\.(?P<frac>\d+)\s+of\s+" + _DET + _LIMIT_ADJ + r"(?:peak|roofline|roof|speed[- ]of[- ]light|sol|"
    r"max(?:imum)?|limit|ceiling|theoretical)|"
    r"\bwithin\s+(?!\d|reach|range)(?:[\w'-]+\s+){1,3}?of\s+" + _DET + _LIMIT_ADJ + _LIMIT_NOUN + r"|"
    r"\bwithin\s+(?:(?:about|roughly|around|approximately|only|just|~)\s*)?(?:(?P<gap>\d+(?:\.\d+)?)\s*(?:%|percent)|"
    r"a (?:few|couple of) percent|noise|a hair)\s+of\s+"
    + _DET
    + _LIMIT_ADJ
    + _LIMIT_NOUN
    + r"|(?<![\d.])(?P<gap2>\d+(?:\.\d+)?)\s*(?:%|percent)\s+(?:off|from|short of|shy of|below|under|away from)\s+"
    + _DET
    + _LIMIT_ADJ
    + _LIMIT_NOUN
    + r"|(?<![\d.])(?P<got>\d+(?:\.\d+)?)\s*(?:tb/s|gb/s|tflop/?s|tflops)?(?:\s*/\s*|\s+(?:out of|of|against|vs\.?|"
    r"versus|on an?)\s+)"
    r"(?:a |an |the )?(?:theoretical |peak |possible |max(?:imum)? |spec(?:ified)? |hardware )?(?P<peak>\d+(?:\.\d+)?)"
    r"\s*(?:tb/s|gb/s|tflop/?s|tflops)",
    # "memory-bound", "compute limited", "Amdahl-limited", said of something ("is", "are", "seems", ...)
    r"(?:\b(?:is|are|was|were|be|been|being|becomes?|became|remains?|stays?|seems?|looks?|appears?|now|still|"
    r"purely|entirely|fundamentally|firmly|completely|totally)\b[^,;:.!?]{0,60}?|'s\b[^,;:.!?]{0,60}?|"
    r"'re\b[^,;:.!?]{0,60}?|^\W*)"
    r"(?P<claim>\b" + _BOUND_KIND + r"(?:[- ]" + _BOUND_KIND + r")?[- ](?:bound|limited)\b)"
    r"(?!\s+(?:kernels?|code|workloads?|operations?|ops|regime|cases?|problems?|loops?|phases?)\b)",
    # "limited by memory bandwidth", "bottlenecked purely by HBM", "at the mercy of the DRAM"
    r"\b(?:bound|bounded|limited|bottlenecked|capped|throttled|gated|constrained|held back|dictated|governed|"
    r"determined|"
    r"set|pinned|tied|locked)"
    r"\s+(?:(?:purely|entirely|only|solely|simply|now|mainly|mostly|fundamentally|just|strictly)\s+)?(?:by|on|to)\s+"
    r"(?:the\s+|our\s+|its\s+|raw\s+|pure\s+)?" + _RESOURCE + r"\b|"
    r"\bat the mercy of\s+(?:the\s+)?" + _MACHINE + r"\b",
    # the machine, not the code, limits it: "the GPU is the limit now", "it's the hardware, not the code"
    r"\bonly thing\b[^.;!?]{0,50}?\bis\s+(?:now\s+)?(?:the\s+)?(?:[\w-]+\s+)?" + _MACHINE + r"\b|"
    r"\b(?:bottleneck|limiting factor|limiter|(?:binding )?constraint)\s+(?:is|are)\s+(?:now\s+|simply\s+)?(?:the\s+)?"
    r"(?:[\w-]+\s+)?" + _MACHINE + r"\b|"
    r"\b" + _MACHINE + r"(?:\s+itself)?\s+(?:is|are)\s+(?:now\s+|simply\s+|clearly\s+)?(?:the\s+|our\s+)?"
    r"(?:only\s+)?(?:bottleneck|limit(?:ing (?:factor|resource))?|limitation|limiter|constraint|ceiling)\b|"
    r"\b(?:code|kernel|software|implementation)\s+is\s+(?:the\s+)?(?:bottleneck|limiting factor|limit)\s+no longer\b|"
    r"\b(?:code|kernel|software|implementation)\s+(?:is\s+no\s+longer|isn't|is\s+not)\s+(?:the\s+|what's\s+)?"
    r"(?:bottleneck|limiting factor|problem|holding it back|limit)\b|"
    r"\b(?:it's|it is|the)?\s*" + _MACHINE + r",?\s+not\s+(?:of\s+|in\s+)?(?:the\s+|our\s+|my\s+)?"
    r"(?:code|software|kernel|implementation|algorithm)\b|"
    r"\b(?:property|limitation|consequence) of the (?:hardware|chip|gpu|device|silicon|memory system|architecture)\b|"
    r"\b(?:physical|hardware|architectural) (?:constraint|limitation|limit|ceiling|barrier)\b[^.;!?]{0,40}?"
    r"\b(?:we're|we are|we've hit|up against|at it|hit it)\b",
    # "is near-optimal", "already optimal", "close to optimal"
    r"\b(?:near|nearly|close to|essentially|basically|practically|virtually|already|about as|effectively)"
    r"[- ]optimal\b|\bpractical optimum\b|"
    r"\b(?:near|close to|nearly|almost)[- ](?:theoretical|peak|roofline|speed[- ]of[- ]light|sol|max(?:imum)?|ideal)\b"
    r"(?!\s+(?:of|for)\b)|\b(?:bandwidth|memory|traffic|compute|io|work)[- ]optimal\b",
    r"(?:\b(?:is|are|seems|looks|remains)\b|'s\b|'re\b)\s+(?:[\w-]+\s+){0,3}?(?P<claim>optimal|ideal|"
    r"optimi[sz]ed to the hilt|(?:fully|completely|thoroughly|maximally) (?:optimi[sz]ed|tuned))\b(?!\s+(?:choice|"
    r"tile|size|"
    r"value|setting|configuration|layout)\b)",
    # it cannot be made faster: "can't go any faster", "HBM can't feed the SMs any faster", "no way to make
    # this kernel meaningfully faster", "won't help", "can't be improved", "we can't code around it"
    r"\b" + _CANNOT + r"\s+(?:" + _NOT_ABOUT_SPEED + r"[\w'/.-]+\s+){0,5}?" + _IMPROVE + r"\b|"
    r"\b" + _CANNOT + r"\s+" + _WORDS + r"{0,5}?" + _FASTER + r"\b|"
    r"\b" + _CANNOT + r"\s+(?:be\s+)?" + _WORDS + r"{0,3}?(?:improv(?:e|ed)|optimi[sz]ed?|sped up|speed\s+"
    r"(?:\w+\s+)?up|beat(?:en)?|bettered|accelerated|squeeze\w*|shave\w*|gain (?:any|more|much)|help|helps|"
    r"pay off|matter|buy (?:us )?(?:anything|much|more)|budge|move the needle|touch (?:it|this|that)|"
    r"code around|engineer around|do (?:any |much )?better|extract (?:any )?more|make (?:a|any|much) "
    r"(?:difference|dent))\b",
    r"\b(?:(?:don't|do not|can't|cannot) (?:think|believe|see how|expect|imagine)|(?:doesn't|does not) (?:look|seem) "
    r"like|doubt|unlikely|doubtful|"
    r"improbable)\s+(?:that\s+)?"
    r"(?:[\w']+\s+){0,4}?(?:(?:can|could|will|would|'ll|to)\s+(?:[\w']+\s+){0,4}?(?:" + _IMPROVE + r"|more|"
    r"make (?:a|any) (?:real )?difference)|(?:is|are|would be|will be)\s+(?:\w+\s+)?(?:productive|worthwhile|worth it|"
    r"useful|beneficial|helpful|possible|feasible|warranted|justified))\b",
    r"\b(?:speed-?ups?|improvements?|gains?|(?:going |getting |running )?faster|optimi[sz]ations?|squeez\w+|"
    r"pushing (?:further|harder|on)|getting more)\b[^.;,!?]{0,30}?"
    r"\b(?:(?:is|are)(?:n't|\s+not)\s+(?:simply\s+|just\s+|really\s+)?(?:possible|feasible|achievable|attainable|"
    r"available|realistic|on the table|to be had)|(?:is|are)\s+(?:simply\s+|just\s+|\w+ly\s+)?"
    r"(?:impossible|infeasible|out of reach|unrealistic|not realistic|implausible))\b",
    # polite giving up: "I couldn't find anything else to improve", "I don't see any way to make it faster",
    # "I'm out of ideas", "I have no further optimizations to suggest", "I've tried everything"
    r"\b(?:couldn't|could not|wasn't able to|was not able to|was unable to|failed to|didn't manage to|"
    r"haven't been able to|have not been able to|can't|cannot|(?:am|'m) not able to|(?:am|'m) unable to)\s+"
    r"(?:find|get|make|squeeze|extract|come up with|discover|locate|achieve|produce|obtain|"
    r"think of|see|identify|spot)\s+" + _WORDS + r"{0,5}?(?:faster|further|speed-?ups?|improvements?|gains?|"
    r"better|anything (?:else|more|further)|more (?:performance|speed)|other (?:ways?|ideas?|optimi\w+)|"
    r"(?:a single |any |one )?(?:bottleneck|inefficienc\w+|opportunit\w+|thing|idea|trick)s? (?:left|remaining))\b|"
    r"\b(?:(?:don't|do not|can't|cannot) see|see no|there's no|there is no|there are no)\s+(?:any\s+)?"
    r"(?:obvious\s+|remaining\s+|further\s+|other\s+|more\s+|realistic\s+|viable\s+|faster\s+|better\s+|"
    r"quicker\s+)*(?:way\s+(?:to|of|around|"
    r"forward|left)\b(?!\s+(?:know|knowing|tell|check|see|debug|verify|confirm|be sure))|paths?|routes?|avenues?|"
    r"opportunit(?:y|ies)|options?|levers?|angles?|ideas?)\b|"
    r"\b(?:can't|cannot|don't|do not) see (?:any\s+)?(?:remaining|further|other|more) (?:bottlenecks?|inefficienc\w+|"
    r"waste|hot ?spots?|problems?)\b|"
    r"\b(?:not sure|unsure|doubt)\s+(?:that\s+|whether\s+|if\s+)?(?:there's|there is|there are)\s+(?:much|any\w*|"
    r"a lot)\s+"
    r"(?:\w+\s+)?(?:more|left|else|remaining|to gain|to be had)\b|"
    r"\b(?:would|'d) be (?:very |quite |really |a bit )?surprised if\b(?!\s+(?:[\w']+\s+){0,3}?(?:\w+n't|not)\b)"
    r"[^.;]{0,60}?\b(?:(?:helped|helps|help|faster|better|gains?|improv\w*|more)\b|another \d+(?:\.\d+)?\s*%)|"
    r"\b(?:don't|do not) have (?:a single |one |another |any )(?:other |more |further |new )?(?:idea|trick|"
    r"optimi[sz]ation|option|change)s?\b|"
    r"\b(?:run|ran|running|are|we're|i'm) out of (?:room|runway|road|headroom)\b(?!\s+(?:in|for|on)\b)|"
    r"\b(?:(?:don't|do not) have|have no|with no|got no)\s+(?:any\s+)?(?:more|further|other|new)\s+"
    r"(?:ideas|optimi[sz]ations|tricks|options|suggestions)\b|\b(?:don't|do not) have (?:anything|any \w+) "
    r"(?:else|more|further)\b|"
    r"\b(?:exhausted|run out of|ran out of|out of|used up|burned through)\s+(?:all\s+)?(?:the\s+|my\s+|our\s+)?"
    r"(?:[\w-]+\s+)?(?:optimi[sz]ations?|ideas|options|avenues|tricks|design space|search space|possibilities|knobs|"
    r"levers|approaches|ways)\b|"
    r"\bno (?:faster|better|quicker) (?:way|path|route|option|approach|kernel|variant)\b|"
    r"\b(?:tried|exhausted|attempted)\s+(?:everything|every (?:idea|trick|option|optimi\w+)|"
    r"all (?:the |my )?(?:ideas|options|tricks|optimi\w+))\b|"
    r"\bas far as (?:I|we|it|this|one) (?:can|could|will|'ll)(?: (?:take it|take this|go|push it|get it))?\b"
    r"(?!\s+(?:tell|see|know|judge|say|measure|gauge))|"
    r"\b(?:give|giving|gave|given) up (?:on )?(?:[\w']+\s+){0,3}?" + _IMPROVE + r"\b",
    # nothing more to gain: "no headroom left", "zero performance left on the table", "no further speedup
    # to be had", "nothing left to squeeze", "nothing more I can do", "every last cycle squeezed out"
    r"\b(?:no|zero|not much|hardly any|barely any|little)\s+(?:more\s+|further\s+)?(?:[\w-]+\s+){1,2}?"
    r"(?:to be (?:had|gained|won|found)|left to (?:gain|squeeze|extract|win|get)|to (?:gain|squeeze|extract|win|give|"
    r"offer|spare))\b|"
    r"\bonly\s+(?:[\w-]+\s+){0,2}?(?:lever|option|thing|way|route|path|fix|knob|hope|idea)s?\s+(?:left|remaining)\b"
    r"(?:\s+(?:would be|is|are)\b)?|"
    r"\b(?:no|zero|(?<!a )little|not much|not a lot of|hardly any|barely any|not any|no real|no meaningful|"
    r"no significant)\s+(?:(?:further|more|remaining|additional|other|extra|real|meaningful)\s+)?"
    r"(?:\w+\s+)?(?:" + _GAIN + r"|latency|stalls?|bubbles?|idle time|imbalance|gap)\s+(?:is\s+|are\s+)?"
    r"(?:left|remaining|remains|"
    r"available|possible|to be (?:had|gained|"
    r"found|won)|to (?:gain|get|find|squeeze|extract|win|chase|harvest|be had)|on the table|anywhere|in any|"
    r"worth|that (?:would|could|will|can)|I can see|in sight|to speak of)\b|"
    r"\b(?:no|zero|(?<!a )little|not much|hardly any|barely any)\s+(?:further|more|remaining|additional|extra)\s+"
    + _GAIN
    + r"\b|"
    r"\b(?:no|zero|(?<!a )little|not much|hardly any|barely any)\s+(?:\w+\s+)?(?:headroom|slack|upside|daylight|"
    r"juice)\b"
    r"(?!\s+(?:for|to)\s+(?:doubt|worry))|"
    r"\b(?:nothing|little|not much)\s+(?:(?:left|more|else|further|much|obvious|useful|meaningful|significant)\s+)*"
    r"(?:to\s+(?:gain|optimi[sz]e|squeeze|trim|remove|"
    r"improve|"
    r"do|try|chase|get|win|extract|rebalance|balance|attack|tune|shave|overlap|hide|fuse|cut|speed (?:\w+ )?up|"
    r"offer|be (?:done|gained|had))|worth (?:chasing|pursuing|doing|trying|the effort|it)|on the table|"
    r"(?:that\s+)?(?:I|we|one) (?:can|could) "
    r"(?:do|try|change|think of|shave(?: off)?|squeeze(?: out)?|cut|gain|get|take out|remove|optimi[sz]e|improve))\b|"
    r"\bnothing (?:left|more)(?:\s+(?:here|there|now|anymore))?\s*(?:[.;,!:)\u2014]|\s-\s|$)|"
    r"\bnothing (?:more|else|further) (?:can|could) be (?:done|optimi[sz]ed|improved|gained|squeezed|extracted|"
    r"had|won|shaved)\b|\bnothing\s+(?:else\s+|more\s+|further\s+)?(?:is\s+|remains\s+)?(?:left|remaining)\s+"
    r"(?:to|on|in|for)\b(?!\s+(?:fix|check|test|debug|correct|verify|clean|document|report|review|handle|address|"
    r"(?:the\s+|my\s+|our\s+)?(?:todo|to-do|list|agenda|backlog|checklist))\b)|"
    r"\b(?:extract(?:s|ed|ing)?|squeez(?:e|ed|es|ing)|wrung|wring)\s+(?:out\s+)?(?:\w+ly\s+)?(?:all|everything|"
    r"the whole(?: of)?|the full|every (?:last )?\w+|"
    r"\w+ dry|what(?:ever)? (?:there is|is left|remains)|what (?:it|this \w+|the \w+) has(?: to give| left)?)\b|"
    r"\bwrung (?:\w+ )?(?:dry|out)\b|\bevery (?:last )?(?:bit|"
    r"drop|ounce) of (?:performance|speed|"
    r"bandwidth|throughput)\b|\bevery last cycle\b|"
    r"\b(?:extracts?|extracted|gets?|delivers?|using|uses)\s+(?:the\s+)?(?:full|all the|all of the|the entire)\s+"
    r"(?:capability|capabilities|bandwidth|throughput|performance|potential|power)\b",
    # nothing moves it: "nothing beats the current version", "none of the remaining ideas can beat this",
    # "no code change can touch it", "no amount of tuning will move this number"
    r"\bnothing (?:better|faster|more) is (?:achievable|possible|attainable|available|realistic)\b|"
    r"\b(?:nothing|none)\b[^.;,!?]{0,40}?\b(?:produces?|makes?|gives?|yields?)\s+(?:a|any)\s+(?:\w+\s+)?(?:difference|"
    r"change|gain|speed-?up)\b|"
    r"\b(?:hardware|memory system|hbm|dram|physics)\b[^.;]{0,20}?\b(?:we|i|one) (?:can't|cannot|can not) (?:control|"
    r"change|fix|influence|affect)\b|"
    r"\b(?:fully|completely|over)[- ]?subscribed\b|"
    r"\b(?:hardly|barely|scarcely) anything (?:is |remains )?(?:left|remaining|to (?:gain|be had))\b|"
    r"\b(?:everything|all) (?:it|they|we|the \w+) (?:can|could)(?: (?:do|give|deliver))?\b(?!\s+to\b)|"
    r"\b(?:buys?|gives?|yields?|brings?|gains?)\s+(?:us\s+)?(?:less than|under|below)\s+(?:half a percent|a percent|"
    r"a fraction of a percent|(?<![\d.])\d(?:\.\d+)?\s*%)|"
    r"\b(?:differences?|gains?|changes?|improvements?|variations?)\b[^;,!?]{0,30}?\b(?:is|are)\s+(?:\w+\s+)?noise\b|"
    r"(?:\bnot|n't)\s+(?:finding|seeing|getting)\s+any\s+(?:(?:further|more|other)\s+(?:wins|gains|speed-?ups|"
    r"improvements|ideas)|(?:opportunit\w+|room|headroom|way)\s+(?:for|to)\s+(?:further|more|speed|improv|"
    r"optimi)\w*)\b|"
    r"\b(?:at most|only|just|maybe) (?:a percent|a few percent|a couple of percent|(?<![\d.])\d(?:\.\d+)?\s*%)"
    r"(?: or two)? (?:is |are )?(?:left|remaining|on the table|to gain)\b|"
    r"\b(?:speed-?up|gains?|improvements?|headroom)\s+(?:is|are)\s+(?:purely\s+|only\s+|merely\s+)?(?:theoretical|"
    r"hypothetical|academic)\b|"
    r"\b(?:none|nothing)\b[^.;,!?]{0,40}?\b(?:was|were|is|are)\s+(?:statistically\s+)?(?:significant|measurable|"
    r"meaningful|noticeable)\b|\bat a loss for (?:further|more|any|other) (?:speed-?ups?|ideas|improvements|"
    r"optimi[sz]ations|ways)\b|"
    r"\b(?:nothing|none)\b[^.;,!?]{0,40}?\b(?:helps?|helped|beats?|improves?|improved|(?:will|would|can|could|"
    r"does|did|seems to)\s+" + _WORDS + r"{0,2}?(?:help|beat|improve|make (?:it|this|a|any)|move|speed|matter)|"
    r"(?:(?:has|have|had)\s+(?:\w+\s+)?)?(?:moved|changed|improved|helped|shifted) (?:the (?:time|runtime|number|"
    r"timing|"
    r"needle)|"
    r"it|anything|things)|budged|shows? up|matters|registers in the timings?|"
    r"moves? the needle|pays? off|made (?:it|a|any) (?:\w+ )?(?:difference|faster|dent))\b|"
    r"\bno (?:[\w-]+ (?:or [\w-]+ )?)?(?:change|trick|optimi[sz]ation|tweak|idea|approach|amount of \w+)s?\b"
    r"[^.;!?]{0,40}?"
    r"\b(?:can|could|will|would|gets?|fix\w*|help\w*|chang\w*|beat\w*|mov\w*)\b|"
    r"\bno (?:kernel|code|implementation|software) (?:can|could|will) (?:beat|exceed|"
    r"go beyond|outrun)\b|"
    r"\b(?:using|use|uses|consuming|consumes|get|getting|gets)\s+(?:nearly|almost|essentially|basically|practically|"
    r"virtually)?\s*all of (?:it|that|the (?:[\w-]+\s+)?(?:bandwidth|throughput|peak|capacity))\b",
    # saturated, full, maxed: "the tensor cores are saturated", "the pipe is full", "the LSUs are maxed",
    # "issuing every cycle", "running flat out"
    r"(?:\b(?:is|are|been|be|has|have|had|now|already|fully|completely|remains?|stays?)\b|'s\b|'re\b|'ve\b)\s+"
    r"(?:(?:fully|completely|already|now|totally|thoroughly)\s+)*saturat(?:ed|ing)\b|"
    r"\b(?:bandwidth|memory|hbm|dram|compute|tensor[- ]core|math|issue|pipe|io)[- ]saturated\b|"
    r"(?<=[\w']\s)saturat(?:ed|ing|es)\s+(?:the\s+)?(?:memory|dram|hbm|l2|bandwidth|tensor[- ]cores?|compute|sms?|gpu|"
    r"bus|pipes?|device)\b",
    r"\b(?:fully|completely|maximally)\s+(?:utili[sz](?:ed|ing)|using|occupied|busy|used)\b(?!\s+(?:yet|only))|"
    r"\b(?:shows?|showing|reports?|reporting|at|hit|reached|near)\s+(?:full\s+|near[- ]full\s+|complete\s+)?"
    r"saturation\b|\b(?:full|near[- ]full|nearly full|complete)\s+(?:utili[sz]ation|saturation|occupancy of the \w+)\b|"
    r"\balready\s+(?:balances|overlaps|hides|saturates|maxes|spreads|distributes)\b|"
    r"\b(?:balanced|overlapped|hidden|saturated|maxed|optimal|minimal|pipelined)\s+already\b|"
    r"\balready\s+(?:\w+\s+){0,2}?(?:an?\s+)?(?:equal|even|identical|uniform)\s+(?:share|split|load|amount)\b|"
    r"(?:\b(?:are|is)\b|'re\b)\s+all\s+(?:occupied|busy|saturated|in use|full|maxed)\b|"
    r"\bnothing\s+(?:idle|free|spare)\b",
    r"\b" + _MACHINE + r"\s+(?:is|are|'s|'re)\s+(?:now\s+|already\s+|simply\s+|all\s+|(?!only\b)\w+ly\s+)*"
    r"(?:full|maxed(?: out)?|"
    r"pegged|pinned|topped out|at capacity|flat out)\b|"
    r"(?:\b(?:is|are|was|were)\b|'s\b|'re\b)\s+(?:now\s+|already\s+|basically\s+|essentially\s+|both\s+|all\s+)?"
    r"(?:pegged|maxed)\b|"
    r"\bmax(?:ed|es|ing)? (?:out\b(?!\s+at\s+\d)|the (?:tensor|memory|bandwidth|hbm|dram|pipe|hardware|gpu|sms?)\b)|"
    r"\b(?:running|runs|run|working|works|streaming|streams)\s+(?:at\s+)?(?:full tilt|flat out|full speed|"
    r"full throttle|line rate|peak)\b|\bflat[- ]out\b|\bto the (?:fullest|max(?:imum)?|hilt)\b|"
    r"\b(?:fully|completely|constantly|100%)\s+busy\b|\b(?:busy|issuing|active)\s+(?:on\s+)?(?:every|each)\s+"
    r"cycle\b|\bno idle (?:cycles?|slots?)\b|"
    r"\b(?:every|all|each)\s+(?:the\s+)?(?:functional\s+)?(?:units?|pipes?|pipelines?|sms?|warps?|lanes?)\s+"
    r"(?:is\s+|are\s+)?(?:now\s+)?(?:busy|saturated|maxed|full|pegged|occupied)\b",
    # already balanced, overlapped, minimal: nothing left to redistribute
    r"\b(?:already|perfectly|fully|evenly|well|entirely|completely|totally)(?:\s+(?:perfectly|fully|well|evenly|"
    r"optimally|entirely|completely))?[- ](?:load[- ])?(?:balanced|matched|overlapped|hidden|distributed|spread|"
    r"minimi[sz]ed|uniform)\b|\balready (?:evenly|perfectly|fully|optimally|equally) (?:\w+ed|split|spread|shared)\b|"
    r"\b(?:already|is|are)\s+(?:already\s+)?(?:minimal|irreducible|at (?:its|their|the) minimum)\b|"
    r"\balready\s+(?:move|moves|read|reads|load|loads|do|does|transfer|transfers)\s+(?:the\s+)?(?:theoretical\s+|"
    r"absolute\s+)?minimum\b|"
    r"\b(?:irreducible|unavoidable|inherent)\s+(?:\w+\s+){0,2}?(?:data|memory|traffic|latency|cost|work|transfers?|"
    r"bytes|"
    r"round[- ]trips?|accesses|reads|loads|"
    r"time|movement)\b|\b(?:inherent|intrinsic) (?:to|in) (?:the\s+)?" + _MACHINE + r"\b|"
    r"\b(?:bytes|data|traffic)\b[^.;!?]{0,30}?\b(?:must|has to|have to) (?:be )?(?:moved?|read|loaded|transferred|"
    r"streamed|fetched)\b",
    # the best that can be had: "the best achievable", "the best we can do", "as good as it gets", "as close
    # to peak as it's going to get", "as fast as the hardware allows", "the fastest it will ever be"
    r"\b(?:the\s+|about\s+the\s+)?(?:best|fastest|quickest)\s+(?:\w+\s+){0,2}?(?:achievable|attainable|possible)\b"
    r"(?!\s+(?:[\w-]+\s+){0,4}?(?:is|are)\s+(?:\w+\s+)?(?:twice|double|triple|half|\d+(?:\.\d+)?\s*(?:x|times))\b)|"
    r"\bthe best (?:that )?(?:we|one|anyone|i|you|it|(?:this|the|our) \w+)?\s*"
    r"(?:can|could|'ll|will(?: ever)?|are going to|'re going to|am going to|'m going to|is going to|allows|permits)\s*"
    r"(?:(?:be\s+)?(?:do|get|achieve|hope for|manage|reach|done|achieved|had)\b)?|"
    r"\bthe fastest (?:it|this|the kernel|this kernel|we) (?:will|can|is going to|'ll) (?:ever )?(?:be|get|go|run)\b|"
    r"\bas (?:good|fast|efficient|optimi[sz]ed) as (?:[\w-]+\s+){1,3}?(?:gets?|goes|can be|will be|is going to be)\b|"
    r"\bas (?:fast|good|efficient|optimi[sz]ed|close|near|tight|lean|quick|high|low|short|small|minimal|cheap|few|"
    r"hard)\b"
    r"[^.;,!?]{0,40}?\bas\s+"
    r"(?:(?:it|this|we|one|anyone|they|you|i|(?:the|this|our)\s+\w+)(?:'s|'re| is| are|'m|'ll)?\s+"
    r"(?:(?:can|could|will|is going to|are going to|going to|gonna|realistically|reasonably|ever|possibly)\s+)*"
    r"(?:get|go|be|make it|run|perform)(?:s|es)?\b|"
    r"(?:is\s+)?(?:\w+ly\s+)?(?:possible|feasible|achievable|realistic|practical)\b|"
    r"(?:the\s+)?" + _WORDS + r"{0,2}?(?:allows?|lets? (?:it|us)|permits?|will let (?:it|us)))",
    # the limit of what the machine can do: "what the silicon can physically deliver", "everything the
    # architecture allows", "its upper limit"
    r"\b(?:what|everything|all)\s+(?:that\s+)?(?:the|this|our)\s+(?:\w+\s+)?(?:hardware|gpu|device|chip|card|"
    r"silicon|architecture|h100|h200|hopper|memory|hbm|dram)\s+(?:can\s+(?:\w+\s+)?(?:do|deliver|give|offer|"
    r"sustain|handle|provide)|allows|permits|offers|gives|is capable of|has(?: to give| left)?)\b|"
    r"\b(?:all|everything)\s+(?:the\s+)?(?:performance|speed|bandwidth|throughput)\s+(?:that\s+)?(?:the|this|our)\s+"
    r"(?:\w+\s+)?(?:hardware|gpu|device|chip|card|silicon|architecture|kernel|memory)\s+(?:has|can give|offers|gives|"
    r"allows)\b",
    r"\b(?:rate|speed|pace|throughput)\s+(?:that\s+)?the\s+(?:\w+\s+)?(?:hardware|gpu|device|memory|hbm|dram|chip)\s+"
    r"(?:allows|permits|sets|dictates|imposes|gives|can (?:sustain|deliver|handle))\b|"
    r"\beverything (?:that )?(?:can|could) (?:possibly )?be \w+ed\b|"
    r"\bcan only (?:\w+ ){1,2}so (?:many|much|fast)\b|"
    r"\b(?:runtime|time|timing|performance|speed)\s+(?:now\s+)?(?:tracks|follows|scales with|is set by|"
    r"is determined by)\s+"
    r"(?:the\s+)?(?:memory|hbm|dram|bandwidth|hardware)\b|"
    r"(?:n't|\bnot)\s+(?:a\s+)?(?:good|wise|worthwhile|productive|useful|sensible) use of (?:time|effort)\b|"
    r"\b(?:headroom|room|slack|gains?|performance|upside)\s+(?:has|have)\s+(?:all\s+)?(?:been\s+)?(?:used up|exhausted|"
    r"taken|consumed|squeezed out|captured|claimed|realized|eaten)\b|"
    r"\b(?:isn't|is not|not|won't be) going anywhere\b|"
    r"\bwithout (?:a |an )?(?:faster|new|newer|better|bigger) (?:hbm|memory|hardware|gpu|card|chip|silicon|"
    r"architecture)\b|"
    r"\b(?:inherently|fundamentally) (?:serial|sequential|memory[- ]bound|bandwidth[- ]bound)\b|"
    r"\bpast the point (?:where|at which|of)\b|"
    r"\b(?:would|'d|will) be (?:just )?wasting\b(?![^.;,]*\bif\b)|\bwast(?:ing|e of) (?:evaluations|evals|budget|"
    r"steps)\b(?![^.;,]*\bif\b)|"
    r"\b(?:edge|limits?|end|boundary) of what(?:'s| is) (?:\w+ly )?possible\b|"
    r"\b(?:expect|anticipate|foresee)(?:ing)?\s+(?:no|nothing|little|zero)\s+(?:further\s+|more\s+|additional\s+|"
    r"real\s+|"
    r"meaningful\s+)?(?:gains?|improvements?|speed-?ups?|benefit|progress|change)\b|"
    r"\b(?:every|all)\s+(?:the\s+)?(?:limits?|ceilings?|bounds?|roofs?)\s+(?:[\w']+\s+){0,3}?(?:is|are)\s+(?:now\s+)?"
    r"(?:hit|reached|met|saturated|maxed)\b|"
    r"\b(?:noise|variation|variance|jitter)\b(?:\s+[\w-]+){0,4}?\s+(?:exceeds|is (?:now |already |still )?(?:larger|"
    r"bigger|greater) than|"
    r"outweighs|dwarfs|swamps|drowns out)\s+(?:any|the|every)\s+(?:[\w-]+\s+)?(?:improvement|gain|difference|"
    r"speed-?up|change)s?\b|"
    r"\b(?:vanishingly|negligibly|insignificantly) small\b|\bbecome (?:very |too )?(?:tiny|negligible|marginal)\b|"
    r"\b(?:the most|at most|only|just) (?:(?:we|i|one) (?:could|can) )?(?:still )?(?:gain|get|win|save)\w*\s+"
    r"(?:is\s+)?(?:about\s+|around\s+|roughly\s+|~\s*)?(?<![\d.])(?P<gap5>\d+(?:\.\d+)?)\s*%|"
    r"\b(?:minimum|floor|lower bound|limit|speed[- ]of[- ]light|best possible)\b(?:\s+[\w-]+){0,3}?\s+(?:of|is|at|=)?"
    r"\s*~?(?P<floor>\d+(?:\.\d+)?)\s*(?:ms|us|\u00b5s)\b[^.;]{0,60}?\b(?:we|our kernel|the kernel|it|ours)\s+"
    r"(?:\w+\s+)?(?:run|runs|take|takes|are at|sit at|measure|is at|'re at|achieve|clock in at|finish)\s+(?:at\s+|"
    r"in\s+)?"
    r"~?(?P<took>\d+(?:\.\d+)?)\s*(?:ms|us|\u00b5s)\b|"
    r"(?<![\d.])(?P<took2>\d+(?:\.\d+)?)\s*(?:ms|us|\u00b5s)\s+(?:vs\.?|versus|against|compared to|"
    r"next to)\s+(?:an?\s+|the\s+)?"
    r"(?:[\w-]+\s+)?(?P<floor2>\d+(?:\.\d+)?)\s*(?:ms|us|\u00b5s)\s+(?:floor|bound|minimum|limit|lower bound|"
    r"speed[- ]of[- ]light)\b|"
    r"\bfor (?:essentially |basically |practically |almost |next to |very )?(?:nothing|little|no (?:real )?(?:gain|"
    r"benefit|return))\b|"
    r"\b(?:that's|this is|that is)\s+(?:all|everything|the most|as much as)\s+(?:I|we|one)\s+(?:can|could)\s+"
    r"(?:do|(?:get|squeeze|extract|wring) out of (?:it|this|the kernel|this kernel|the hardware))\b|"
    r"\b(?:overlap|pipelining|latency hiding)\s+is\s+(?:now\s+|already\s+)?(?:complete|perfect|total)\b|"
    r"(?:\b(?:is|are)|'s)\s+(?:\w+\s+)?(?:unrecoverable|irrecoverable|unreachable|unattainable|not recoverable)\b|"
    r"\b(?:all|everything) (?:the )?(?:[\w-]+ )?there is(?: to (?:get|have|gain|squeeze|take|win))?\b|"
    r"\bwithin\s+(?:about\s+|roughly\s+|~\s*)?(?:0(?:\.\d+)?|1(?:\.\d+)?|2)\s*%\s+of each other\b",
    # physics: "physics won't let this go faster", "we're fighting physics", "physically can't go faster"
    r"\b(?:(?:the\s+)?laws? of physics|physics)\b[^.;!?]{0,80}?\b(?:won't|will not|doesn't|does not|wouldn't|can't|"
    r"cannot|says no|forbids?|prevents?|stops? us|is the (?:limit|bottleneck|constraint)|caps?|capped)\b|"
    r"\b(?:fighting|against|dictated by|limited by|bound by|set by|down to)\s+(?:the\s+)?(?:laws of\s+)?physics\b|"
    r"\b(?:laws? of physics|physics)\b[^.;!?]{0,80}?\b(?:floor|limit|ceiling)\b[^.;!?]{0,80}?\b(?:we're|we are|"
    r"we've)\s+"
    r"(?:\w+\s+)?(?:(?:on|at|against|hit|reached) (?:it|that)|there)\b|"
    r"\bphysically\b[^.;!?]{0,80}?\b(?:can't|cannot|can not|won't|impossible|no way)\b|"
    r"^\W*short of\b",
    # a limit just named, then "we're there": "puts a ceiling on us, and we're there", "we've hit that
    # bound", "caps us at roughly where we are now"
    r"\b(?:we're|we are)\s+(?:now\s+|already\s+|basically\s+|essentially\s+|pretty much\s+)*there\b|"
    r"\b(?:limits?|ceiling|roofline|peak|speed[- ]of[- ]light|floor|bound|wall|cap|maximum|minimum|constraint)\b"
    r"[^.;!?]{0,80}?"
    r"\b(?:we're|we are|we sit|we've|we have|the kernel is|our kernel|it's|ours)\s+(?:[\w-]+\s+){0,2}?"
    r"(?:within (?:[\w'-]+\s+){1,3}?of|at|on|right at|right on|right under|just under|touching|(?:right )?up against|"
    r"against|reached|hit|matched|touched)\s+(?:it|that|this)\b|"
    r"\b(?:we're|we are|we've|we have|it's|it is|the kernel is)\s+(?:now\s+|already\s+|basically\s+|"
    r"essentially\s+|right\s+|pretty much\s+|sitting\s+)*(?:hit|reached|at|on)\s+(?:that|this)\s+"
    r"(?:bound|limit|ceiling|cap|floor|wall)\b|"
    r"\b(?:caps?|capped|limits?|bounds?|holds?|pins?|keeps?)\s+(?:us|it|the speedup|the kernel|performance|things)\s+"
    r"(?:at|to)\s+(?:roughly\s+|about\s+|essentially\s+|exactly\s+)?(?:where we are|what we (?:have|get)|"
    r"our current|the current)\b",
    # Amdahl's law: the part that cannot be sped up caps the rest
    r"\bamdahl\b[^.;!?]{0,80}?\b(?:caps?|capped|bounds?|bounded|limits?|limited|out of reach|ceiling|bites|pointless|"
    r"at most|no (?:more|further)|only|holds?|keeps?|pins?|stuck|holding|keeping|pinning)\b|"
    r"\b(?:by|according to|per|thanks to)\s+amdahl\b|"
    r"\b(?:serial|sequential|unparallel\w*|non-parallel\w*)\s+(?:part|fraction|portion|section|work|epilogue|"
    r"prologue|tail)\s+(?:now\s+)?(?:dominates|bounds|caps|limits|sets)\b",
    # diminishing returns, not worth it: "further tuning is unlikely to pay off", "not worth pushing
    # further", "any more effort would be wasted", "the effort-to-gain ratio"
    r"\bdiminishing[- ]returns\b|(?:n't|\bnot|\bno longer|\bhardly)\s+(?:really\s+)?(?:justified|warranted)\b|"
    r"\bno (?:additional|further|more|extra) (?:work|effort|tuning|optimi[sz]ation) is (?:warranted|justified|"
    r"needed)\b|"
    r"\b(?:dropped|fallen|fell|shrunk|shrank|gone down|come down|down) to (?:a |mere )?(?:fractions? of a percent|"
    r"noise|"
    r"nothing|zero|next to nothing|almost nothing|near zero|the noise)\b|"
    r"\b(?:last|past|recent)\s+(?:few\s+|several\s+|\w+\s+)?(?:iterations|changes|attempts|tweaks|steps|experiments|"
    r"variants|ideas)\b[^.;!?]{0,30}?\b(?:produced|gave|yielded|brought|bought|gained|delivered|made)\s+(?:\w+\s+)?"
    r"(?:nothing|zero|no (?:\w+ )?(?:gain|improvement|speedup|difference))\b|"
    r"(?:n't|\bnot|\bno longer)\s+(?:really\s+)?(?:paying off|pay(?:ing)? (?:for itself|dividends))\b|"
    r"\b(?:smaller and smaller|less and less|ever smaller|ever-smaller)\b|"
    r"\bcan't (?:grow|increase|rise|climb|go) (?:beyond|past|above) (?:this|that|here|what)\b|"
    r"\b(?:gains?|improvements?|returns?|speed-?ups?|performance|progress|numbers|timings?)\s+(?:are\s+|is\s+|has\s+|"
    r"have\s+|have been\s+|has been\s+)?(?:now\s+)?(?:shrinking|vanishing|tapering off|drying up|dried up|flatlined|"
    r"flat-lined|leveled off|levelled off|stalled|flattened out)\b|\btoo (?:small|tiny|minor|marginal) to (?:matter|"
    r"bother|chase|be worth|measure|notice|count)\b|"
    r"(?:\b(?:is|are)(?:n't| not)|\bwouldn't be|\bwould not be|\bnot|\bno longer)\s+(?:really\s+)?(?:meaningful|"
    r"significant|"
    r"material|noticeable|measurable)\b|\b(?:is|are|lies|lie)\s+(?:now\s+)?(?:beyond|out of)\s+(?:\w+\s+)?reach\b|"
    r"\breturns (?:are|have been|were) diminishing\b|\breturns have diminished\b|"
    r"(?:\bnot|n't|\bno longer|\bhardly|\bbarely)\s+(?:really\s+|be\s+)?worth\s+(?:it|the|pursuing|pushing|continuing|"
    r"chasing|more|further|another|doing|spending|trying|going)\b|"
    r"\b(?:unlikely|not likely|doubtful)\s+to\s+(?:pay off|help|matter|give|yield|bring|make|improve|gain|be worth|"
    r"move|change)\b|"
    r"\b(?:would|will)\s+(?:be\s+)?(?:wasted|pointless|futile|a waste)\b|\b(?:(?:trying|tuning|optimi[sz]ing|pushing|"
    r"going|working)\s+(?:[\w-]+\s+){0,3}?)?(?:is|are|seems?|looks?|"
    r"feels?)\s+(?:\w+\s+)?(?:pointless|futile)\b|"
    r"\bmakes?\s+(?:\w+\s+){0,2}"
    r"(?:pointless|futile)\b|\ba waste of (?:time|effort)\b|"
    r"\bno (?:good |real |compelling )?reason to (?:keep|continue|go on|push)\b|\bno point (?:in\s+)?(?:continuing|"
    r"going on|pushing|further|more|trying|optimi\w+|tuning)\b|"
    r"\bcosts? (?:far |much |a lot |way )?more than (?:it's|it is|they're|they are|it would be) worth\b|"
    r"\beffort[- ]to[- ](?:gain|benefit|reward)\b|\b(?:doesn't|does not|wouldn't|would not|can't) justify\b|"
    r"\b(?:each|every) (?:further|additional|new|extra|more) \w+ (?:buys|gives|yields|brings|gains) "
    r"(?:less|little|nothing)\b|"
    r"\b(?:further|additional|remaining|more|from here(?: on| out)?|any (?:more|further)|whatever)\b[^.;!?]{0,40}?\b"
    + _LITTLE
    + r"\b(?!\s+so\b)",
    # what is left is noise: "below the noise floor", "within measurement noise", "chasing noise"
    r"\b(?:below|under|within|inside|lost in|buried in|drowned (?:out )?(?:in|by)|indistinguishable from|smaller than|"
    r"no (?:bigger|larger) than|comparable to|on the order of)\s+(?:the\s+)?(?:run-to-run\s+|measurement\s+|"
    r"timing\s+)?(?:noise|jitter|variance|error bars|resolution|measurement error|error margin|margin of error|"
    r"run-to-run variation|rounding errors?)(?:\s+floor)?\b|\b(?:noise|rounding[- ]error)[- ]level\b|"
    r"\brounding[- ]error (?:differences?|changes?|gains?|territory)\b|"
    r"\b(?:can't|cannot|can not|couldn't|could not|not|isn't|aren't|never)\s+(?:be\s+)?(?:\w+\s+)?(?:separat|"
    r"distinguish|t[eo]ll?)\w*(?: apart)? from (?:the\s+)?(?:[\w-]+\s+)?(?:noise|jitter|variation|variance)\b|"
    r"\bno (?:change|variant|tweak|difference|gain|improvement)s?\b[^.;]{0,40}?\b(?:is|are)\s+(?:\w+\s+)?"
    r"distinguishable from\b|\bstatistically indistinguishable\b|"
    r"\b(?:in|into|down in|at)\s+(?:the\s+)?(?:run-to-run\s+|measurement\s+|timing\s+)?(?:noise|jitter)"
    r"(?:\s+floor)?\b|"
    r"\bchas(?:e|ing)\s+(?:the\s+)?noise\b|"
    r"(?:\b(?:is|are|was|were)\b|'s\b|'re\b)\s+(?:\w+\s+)?(?:pure|just|only|all|mostly|basically|simply|merely)\s+"
    r"(?:noise|jitter)\b|"
    r"\b(?:can't|cannot|no longer|unable to)\s+(?:\w+\s+)?(?:measure|detect|resolve|distinguish)\s+(?:any\s+)?"
    r"(?:improvement|gain|difference|speedup)",
    # only other hardware or another algorithm would help
    r"\b(?:only|nothing (?:short of|but))\s+(?:a\s+|an\s+)?" + _WORDS + r"{0,4}?" + _NEW_MACHINE + r"\b|"
    r"\b(?:need|needs|require|requires|take|takes|would (?:require|need|take)|(?:have to|must|would|can only) "
    r"come from)\s+(?:a\s+)?(?:\w+\s+){0,2}?"
    r"(?:" + _NEW_MACHINE + r"|hardware|silicon|(?:architectural|hardware|silicon) changes)\b",
    # a plateau, the end: "we've hit the flat part of the curve", "this is where it ends", "all avenues have
    # been explored", "there isn't anything left to try", "the end of what tuning can achieve", "the gap to
    # peak is negligible"
    r"\b(?:hit|reached|on|at)\s+(?:the|a)\s+(?:flat (?:part|region|portion)|plateau)\b|"
    r"\bclosed (?:the|that) (?:remaining |last |final )?gap (?:to|with)\s+(?:the\s+)?(?:[\w-]+\s+){0,2}?(?:peak|"
    r"roofline|limit|ceiling|"
    r"speed[- ]of[- ]"
    r"light|sol|hardware|maximum)\b|(?:\b(?:has|have)|'s|'ve)\s+(?:now\s+|essentially\s+)?converged\b|"
    r"(?:\bwe've|\bwe have|\bhas|\bhave|\bit's|\bperformance)\s+(?:now\s+|clearly\s+)?plateaued\b|"
    r"\bthis is where (?:it|we|i|the (?:road|optimi\w+)) (?:ends?|stops?)\b|\b(?:given|gave) it (?:my|our|"
    r"everything)\b|"
    r"\b(?:all|every)\s+(?:the\s+)?(?:\w+\s+)?(?:avenues?|options?|ideas?|optimi[sz]ations?|tricks?|approaches|"
    r"angles|levers)\s+(?:(?:in the book|I know(?: of)?|we know(?: of)?|I can think of)\s+)?(?:have been|has been|are|"
    r"were)\s+(?:\w+\s+)?(?:explored|"
    r"exhausted|tried|applied|used|done|in|covered|in place)\b|"
    r"(?:\b(?:is|are|was)\s+not|\b(?:isn't|aren't|wasn't))\s+(?:really\s+)?(?:any\w*(?:\s+\w+)?|much|"
    r"more(?:\s+\w+)?)\s+"
    r"(?:left|more|else|remaining|further|available|to (?:gain|be had))\b|\bnowhere (?:left|(?:else |"
    r"further )?to go)\b|"
    r"\b(?:poor|low|little|negative|no|minimal|tiny|small|negligible)\s+(?:expected\s+)?(?:payoff|pay-off|"
    r"returns?|benefit|upside)\b|\b(?:squeezed|wrung|sucked|drained)\s+(?:[\w-]+\s+){0,3}?dry\b|"
    r"\bno matter what (?:i|we|you) (?:change|try|do|tweak)\b|\bdead[- ]end\b|"
    r"\b(?:every|each|any|all)\s+(?:other\s+|new\s+|further\s+|recent\s+|the\s+)?(?:variants?|changes?|tweaks?|"
    r"attempts?|ideas?|experiments?)\s+(?:[\w']+\s+){0,4}?(?:slower|worse|no faster|no better|as likely to (?:slow|"
    r"hurt)|"
    r"tie|tied|are tied|ties)\b|"
    r"\b(?:don't|do not) (?:think|believe|see|expect) (?:that )?(?:there's|there is|there are) (?:anything|any \w+|"
    r"much|more)\b|"
    r"\b(?:end|limit|ceiling|edge|extent)\s+of what\s+(?:\w+\s+){0,3}?(?:can|could|will)\s+(?:\w+\s+)?(?:do|achieve|"
    r"give|deliver|get|buy)\b|"
    r"\b(?:gap|distance|difference)\s+(?:to|from|with)\s+(?:the\s+)?(?:[\w-]+\s+){0,2}?(?:peak|roofline|limit|"
    r"ceiling|speed[- ]of[- ]light|sol|hardware|maximum|optimum)\b[^.;!?]{0,20}?\b(?:negligible|tiny|minimal|"
    r"closed|gone|insignificant|small|noise)\b",
    # topped out, converged, the end of the road
    r"\b(?:topped|maxed|bottomed|tapped|capped)\s+out\b(?!\s+at\s+\d[\d.]*\s*(?:registers?|threads?|blocks?|warps?|"
    r"stages?|kb|"
    r"bytes|ctas?)\b)|\bhit a (?:hard |brick )?wall\b|"
    r"\b(?:end of the (?:road|line))\b|\b(?:this|that|it|the kernel|v\d+)\s+is\s+(?:now\s+)?final\b|"
    r"\bfruit\b[^.;!?]{0,30}?\b(?:picked|gone|taken|harvested)\b|\bno (?:more )?(?:[\w-]+ (?:or [\w-]+ )?)?fruits?\b|"
    r"\b(?:run|ran|has run|have run) (?:its|their) course\b|\b(?:numbers?|timings?|runtime|it)\s+(?:won't|"
    r"will not|doesn't|don't|"
    r"can't)\s+(?:budge|move|improve|drop)\s+(?:any ?more|any further)\b",
    # recommendations to stop: "I recommend we stop here", "time to stop tuning", "I'd call this done",
    # "I'll wrap up", "this is the final version", "we're done"
    r"\b(?:(?:i|we|you)(?:'d|'ll| would| will| should| can| must| might as well| may as well)|"
    r"(?:i'm|we're|i am|we are) going to|let's|let us|(?:makes sense|sensible|reasonable|wise|prudent|best|better|"
    r"time|right (?:call|move|thing) is|recommend(?:ation is)?|suggest(?:ion is)?|propos(?:e|ing)|advise|advice is|"
    r"(?:recommendation|suggestion|advice)\s*:|"
    r"(?:happy|ready|content|comfortable|fine|okay|ok|going) to)"
    r"(?: to| that| that we| we| i)?)\s+(?:should\s+)?(?:probably\s+|just\s+|now\s+|simply\s+)?"
    r"(?:stop(?:ping)?|halt|wrap(?:ping)? (?:it |this |things )?up|end (?:it|here)|call (?:it|this|the (?:optimi\w+|"
    r"kernel|work|tuning))|"
    r"(?:conclude|finish|end)(?=\s*(?:here|now|up|[.,;:!]|$|(?:the|this|our) (?:optimi\w+|tuning|work|session|"
    r"effort)))|freeze (?:this|it|v\d+|the (?:[\w-]+ )?kernel|the current)|ship (?:this|it|v\d+|the (?:[\w-]+ )?kernel|"
    r"the current)|"
    r"settle (?:on|for) (?:this|it|v\d+|the current)|leave it(?: (?:here|there|at that|as is))?|"
    r"leave (?:this|the (?:kernel|code|current \w+)|v\d+) (?:as is|alone|here|there|at that)|"
    r"(?:keep|accept)(?:ing)? (?:this|the current|v\d+)|finali[sz](?:e|ing) (?:this|it|v\d+|the (?:kernel|current|"
    r"version))|pack (?:it )?up)\b"
    r"(?!\s+(?:the|a|this)\s+(?:current\s+)?(?:profiler|timer|run|job|process|server|benchmark|sweep|trace|experiment|"
    r"test|measurement|attempt|approach|profil\w*|build|compile)\b)|"
    r"\b(?:to\s+)?stop(?:ping)?\s+(?:here|now|there|at this point|optimi[sz]ing|tuning|iterating|working on (?:it|"
    r"this)|"
    r"pushing|trying|further)\b|"
    r"\bcall(?:ing)? (?:it|this) (?:done|a day|quits|here|finished|complete|final|optimal|the limit)\b|"
    r"\b(?:i'm|im|i am) calling it\s*(?:[.;,!]|$)|"
    r"\b(?:is|was) to (?:stop|halt|wrap up|ship|freeze)\b|\bas (?:the )?final\b|"
    r"\b(?:the|my|our) final (?:version|kernel|submission)\b|"
    # "we're done" alone is an attempt to stop (a decision point of its own), not a claimed limit; with a
    # reason before it, or said of the optimizing, it is one
    r"\b(?:done|did)\s+(?:all|everything|what)\s+(?:that\s+)?(?:can|could)\s+be\s+done\b|"
    r"\b(?:kernel|optimi[sz]ation|work|tuning)(?:\s+here)?\s+(?:is|'s)\s+(?:now\s+|basically\s+|essentially\s+)?"
    r"(?:done|finished|"
    r"complete)\b|"
    r"\b(?:we're|i'm|we are|i am)\s+(?:now\s+)?(?:done|finished)\s+(?:optimi[sz]ing|tuning|squeezing|with (?:the\s+)?"
    r"(?:optimi[sz]ation|tuning|this kernel|the kernel))\b|"
    r"\b(?:so|therefore|hence|thus|which means),?\s+(?:(?:i'm|we're|i am|we are|it's)\s+(?:now\s+)?(?:done|stopping)|"
    r"(?:i'll|we'll|i will|we will|let's) stop)\b|"
    r"\b(?:consider|deem|declare)\s+(?:the\s+)?(?:optimi\w+|work|kernel|tuning|this|it)\s+(?:complete|done|finished|"
    r"final)\b",
    # a limit in other words: "about the max you'd get out of the tensor cores", "I don't expect more",
    # "effectively the limit on H100", "which I'd consider the practical limit", "on the limit of the
    # hardware", "we arrived at the roofline", "performance has saturated", "within 2% of optimal", "run out
    # of road", "blood from a stone", "98% of what cuBLAS gets, and cuBLAS is at peak"
    r"\bthe\s+(?:max(?:imum)?|most|best|limit|ceiling)\s+(?:you|one|we|anyone|anybody)(?:'d|'ll| would| will| can| "
    r"could)?\s+(?:ever\s+)?(?:get|expect|achieve|hope for|reach|squeeze|see)\b|"
    r"\b(?:don't|do not|wouldn't|would not)\s+(?:really\s+)?expect\s+(?:much\s+|any\s+|anything\s+)?(?:more|"
    r"further|better)\b(?!\s+than\b)|"
    r"\b(?:effectively|practically|essentially|basically|de facto)\s+(?:at\s+)?the\s+(?:limit|ceiling|max(?:imum)?|"
    r"peak|roofline|best (?:achievable|possible|we can do))\b|"
    r"(?:(?<=consider )|(?<=regard as )|(?<=count as )|(?<=deem )|(?<=call ))(?:it |this |that |v\d+ )?the\s+"
    r"(?:practical|realistic|real|effective|hard)\s+(?:limit|ceiling|max(?:imum)?|peak)\b|"
    r"\bon the (?:limit|ceiling|roofline|peak) of\b|"
    r"\barriv(?:e|ed|es|ing) (?:to|at) " + _DET + _LIMIT_ADJ + _LIMIT_NOUN + r"|"
    r"\b(?:performance|perf|speed|throughput|timings?|runtime|the numbers?)\s+(?:has|have|had|is|are)\s+(?:now\s+|"
    r"clearly\s+)?(?:saturated|plateaued|converged)\b|"
    r"\bwithin\s+(?:about\s+|roughly\s+|~\s*)?(?P<gap>\d+(?:\.\d+)?)\s*(?:%|percent)\s+of\s+(?:the\s+)?"
    r"(?:optimal|optimum|ideal)\b|"
    r"\b(?:run|ran|running) out of (?:road|runway|steam|tricks)\b|\bblood (?:out of|from) a (?:stone|turnip)\b|"
    r"(?<![\d.])(?P<pct>\d+(?:\.\d+)?)\s*%\s+of\s+(?:what\s+)?(?:the\s+)?(?:cublas|cutlass|cudnn|vendor)\b"
    r"[^.;!?]{0,60}?\b(?:max(?:imum)?|peak|limit|ceiling|best (?:achievable|possible))\b|"
    # what is left is fixed: "the remaining gap is unavoidable", "what's left is a fixed cost of the pipeline",
    # "nothing that software can fix", "doesn't get leaner than that", "not on this hardware", "treating this
    # as the ceiling", "no experiment moves the number anymore", "nothing actionable", "I don't think the
    # kernel has more to give", "even a perfect kernel would be only 3% faster", "the curve has gone
    # asymptotic", "below what our benchmarking can resolve", "as close as mma.sync gets"
    r"\b(?:remaining|residual|leftover|what's left|what is left|what remains|the rest)\b[^.;!?]{0,60}?\b(?:is|are)\s+"
    r"(?:\w+\s+)?(?:unavoidable|irreducible|inherent|mandatory|a fixed cost|fixed overhead|fixed)\b|"
    r"\bnothing (?:that )?(?:software|code|a kernel|the kernel|any kernel|we) can (?:fix|do|change|remove)\b|"
    r"\b(?:doesn't|does not|won't|can't|cannot) get (?:any\s+)?(?:faster|better|leaner|tighter|quicker) than "
    r"(?:this|that)\b|"
    r"\bnot (?:on|with) (?:this|the current|today's) (?:hardware|gpu|card|chip|silicon)\b|"
    r"\btreat(?:ing)? (?:this|it|that) as (?:the|our) (?:\w+ )?(?:ceiling|limit|peak|max(?:imum)?|roofline)\b|"
    r"\b(?:no|none of the)\s+(?:\w+\s+)?(?:experiments?|changes?|knobs?|configs?|variants?|tweaks?)\s+(?:moves?|"
    r"changes?|shifts?|budges?)\s+(?:the\s+)?(?:number|time|timing|result|runtime)\b|"
    r"\bevery (?:knob|change|tweak)\b[^.;!?]{0,30}?\bnoise\b|"
    r"\bnothing (?:actionable|to act on)\b|"
    r"\b(?:don't|do not) think (?:the kernel|it|this|there's|there is|the \w+)\b[^.;!?]{0,30}?\b(?:more to give|"
    r"anything left|much left|more to gain)\b|\b(?:has|have) nothing (?:more|left) to give\b|"
    r"\b(?:perfect|ideal|optimal) (?:kernel|implementation) would (?:be|run|get) (?:only|just|at most)\b|"
    r"\b(?:curve|gains?|returns?)\s+(?:has|have)\s+(?:gone\s+asymptotic|flattened)\b|"
    r"\bbelow what (?:our|the|we|any) \w+ can (?:even )?(?:resolve|measure|detect)\b|"
    r"\bas close as (?:[\w.-]+\s+){1,3}?gets\b|"
    r"\bmakes? (?:\w+ )?unavoidable\b|\b(?:is|are) inherent to\b|"
    r"\bno more than\s+~?\s*\d+(?:\.\d+)?\s*%\s+(?:left\s+)?on the table\b|"
    r"(?<![\d.])(?P<pct2>\d+(?:\.\d+)?)\s*%\s+of\s+(?:the\s+|what\s+(?:a|the)\s+)?(?:memcpy|copy[- ]kernel|"
    r"stream (?:copy|triad)|device-to-device copy)\b|"
    r"\bnot possible (?:to )?make (?:it|this) (?:more fast|faster|quicker)\b|"
    r"\b(?:more|further) (?:work|effort|tuning|optimi\w+) (?:is not|isn't|does not|doesn't|not) (?:make|makes|making) "
    r"sense\b|"
    r"\b(?:not without|only way to make (?:it|this) (?:faster|quicker) is to)\s+(?:\w+\s+){0,2}?(?:fewer|less)\b",
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
