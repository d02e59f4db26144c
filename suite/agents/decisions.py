"""Decision points, detected from the run itself: an attempt to stop early, a plateau, a claimed
limit, the same failure repeated, many steps in one layer. Each comes with its evidence.

A claimed limit is decided by the run's own model where it has one: a short classification call
(`classification_messages`, answered CLAIM or NO and recorded in the trace by the arm), made only for
a text with a sentence that could claim one (`claim_candidates`, a cheap word filter). Where there is
no model, or it cannot say (an error, an answer that is neither), the rules decide (`claimed_limit`):
patterns for the structures of a claim (config.py: at a limit, no room left, cannot be made faster,
not worth it, within the noise, a recommendation to stop, ...), each match checked against the words
around it: a denial, a question, a condition, a goal, another kernel or an earlier version (a subject
before an aside or a label before a colon included), a statement of what holds in general, a limit
named as a value, a low share or rate of the limit (in the clause, or further on where the sentence goes
on with the kernel), a plan to go on, a limit denied later in the sentence; against the next sentence:
a retraction, a plan; and against every later one: the kernel measured at a low share, at a rate or time
well below one named before, called slow, room left. Where the rules find nothing, a small learned model
(claim_model.py) is asked about the candidate sentences that neither go on, nor measure a low share, nor
are taken back (`fallback_candidates`); where they find a claim that model can overrule them, when it all
but rules one out in every candidate sentence (its `veto`)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from . import claim_model
from .claim_model import ClaimModel
from .config import QuestionConfig

if TYPE_CHECKING:
    from .agent import StepRecord

# checked in this order; one question per step at most
PRIORITY = ("early-stop", "claimed-limit", "repeated-failure", "plateau", "layer-dwell")


@dataclass
class DecisionPoint:
    trigger: str
    evidence: dict

    def to_dict(self) -> dict:
        return asdict(self)


# ---- the rules: patterns (config.py), each match checked against the words around it

# a sentence ends at . ! ? followed by a space, or at a line break ("1.5x" stays whole)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
# a clause starts after punctuation or a conjunction; the words around a match are read in its clause
_CLAUSE_BREAK = re.compile(
    r"[,;:()\u2013\u2014]|\s-\s|\b(?:but|so|because|since|although|though|while|whereas|"
    r"and|then)\b",
    re.IGNORECASE,
)

# -- the words before a match, in its clause (and the match's own words before its `claim` group)

# the claim is denied: "not memory-bound", "far from the roofline", "nowhere near peak", "isn't ...",
# "none of the shapes", "I doubt ..."
_DENIAL = re.compile(
    r"\b(?:not|never|no|nothing|none|nowhere|neither|nor|without|hardly|far from|far below|well below|way below|"
    r"a long way|miles|cannot|no longer|doubt)\b|n't\b",
    re.IGNORECASE,
)
# words with a denial's words that deny nothing: "no doubt we are at the roofline"
_NOT_A_DENIAL = re.compile(
    r"\b(?:no doubt|without (?:a )?doubt|no question|not surprising(?:ly)?|no surprise|no matter|not only)\b",
    re.IGNORECASE,
)
# the claim is a condition, a possibility to test, a goal, a thing wished for or a prediction: "if",
# "whether", "could", "to reach", "I'd like", "assuming", "ideally", "we will reach" ("might" and "may"
# only hedge a claim: "this might be the best we'll see")
_NOT_ASSERTED = re.compile(
    r"\b(?:if|whether|when|once|until|unless|before|could(?! well)|should|aim|aiming|"
    r"goal|target|want|wants|try|trying|hope|expect|need|needs|plan|how|let's|let us|let me|like to|wish|"
    r"wonder(?:ing)?|curious|too early|premature|unclear|unsure|(?<!i )assum\w*|(?<!i )suppos\w*|imagine|"
    r"hypothetical\w*|"
    r"ideally|in principle|in theory|theoretically|hopefully|eventually|will|'ll|going to|gonna|"
    r"(?:see|check|test|verify|confirm|determine|find out|know|tell|measure) (?:if|whether|that|how)|"
    r"to (?:get|reach|hit|push|bring|achieve|approach|match|saturate|compare|beat))\b|"
    r"(?<!close )(?<!next )(?<!equal )(?<!up )(?<!due )(?<!compared )(?<!relative )(?<!thanks )(?<!according )"
    r"(?<!similar )(?<!identical )\bto\s*$|^\W*(?:in order )?to\b",
    re.IGNORECASE,
)
# "would" makes a claim hypothetical, unless it is said of further work ("further tuning would be within
# the noise") or hedges a judgement ("I would describe this as the best achievable")
_HYPOTHETICAL = re.compile(
    r"\bwould\b(?! (?:say|describe|call|consider|count|regard|deem|estimate|argue|guess|characteri[sz]e|judge)\b)",
    re.IGNORECASE,
)
_FURTHER_WORK = re.compile(
    r"\b(?:further|additional|remaining|any (?:more|further|other)|more|extra|another|whatever|the rest)\b",
    re.IGNORECASE,
)
# the claim is about another kernel or an earlier version, or a belief reported and since dropped:
# "the reference kernel is memory-bound", "I thought we were at the roofline", "it used to be"
_NOT_OURS = re.compile(
    r"\b(?:reference|baseline|naive|original|old|previous|prior|initial|cublas|cudnn|cutlass|fa[23]|vendor|"
    r"micro-?benchmarks?|memcpy|copy (?:kernel|bandwidth)|stream (?:triad|copy)|"
    r"flash-?attention\S*|pytorch|torch|triton|xformers|their|competitor|textbook|eager|used to|thought|"
    r"first (?:version|kernel|attempt|draft|implementation|try)|"
    r"assumed|said|claimed|believed|suspected|guessed|feared|seemed|previously|earlier|initially|originally|"
    r"at first|wrongly|mistakenly)\b",
    re.IGNORECASE,
)
# a statement of what holds in general, not of the kernel at hand: a generic subject ("below the ridge point a
# kernel is bandwidth-bound", "any streaming kernel is memory-bound") or a general text ("Theory: ...",
# "Roofline primer: ...", "by definition")
_GENERAL = re.compile(
    r"\b(?:a|an|any|every|each)\s+(?:[\w-]+\s+){0,2}?(?:kernel|op|operator|loop|program|workload|code)s?\b|"
    r"\b(?:theory|theoretical(?:ly)?|primer|background|definition|by definition|in general|generally|rule of thumb|"
    r"textbook|wiki|docs|documentation)\b",
    re.IGNORECASE,
)
# a label that opens the sentence, up to its colon ("Goal for this sprint:", "From the NCCL docs:"), that
# names no one speaking ("I'll be honest:" is none): its words are read with the clause of a match after it
# ... or named after the match: "the ceiling for any streaming kernel"
_GENERAL_AFTER = re.compile(
    r"^\s*(?:for|of|on|in)\s+(?:any|every|all|each)\s+(?:[\w-]+\s+){0,2}?(?:kernel|op|operator|program|workload|"
    r"code)s?\b",
    re.IGNORECASE,
)
_LABEL = re.compile(
    r"^\W*(?!(?:[\w'.-]+\s+){0,5}?(?:i|i'll|i'm|i'd|we|we'll|we're|let's)\b)((?:[\w'.-]+\s+){0,5}[\w'.-]+)\s*:\s",
    re.IGNORECASE,
)
# an aside in parentheses is not a clause of its own: the words around it are read as one
_ASIDE = re.compile(r"\([^()]*\)")
# a subject that belongs to another named project or library: "hipCUB's radix sort gets close to the
# bandwidth limit", "llama.cpp's Metal backend runs at 90%" (not a pronoun's, ours, the kernel's or the
# hardware's: "the H100's HBM is saturated")
_OTHERS_SUBJECT = re.compile(
    r"^\W*(?!(?:it|that|there|what|here|he|she|let|who|this|one|where|everything|nothing|kernel|gpu|card|device|"
    r"chip|hardware|h\d+|a\d+|b\d+|mi\d+\w*|sm|today|ours?)'s)[\w.+-]*[a-z][\w.+-]*'s\s+(?:[\w-]+\s+){0,2}?"
    r"(?:kernels?|implementation|backend|version|library|sort|gemm|gemv|scan|reduction|softmax|shader|code|op)\b",
    re.IGNORECASE,
)
# a claim about a part only ("only the load pipe is saturated"); a limit said to exist ("there's a hard
# ceiling at 228 KB", not "there isn't any performance left")
_PART_ONLY = re.compile(r"^\W*(?:only|some)\b", re.IGNORECASE)
_THERE = re.compile(r"\bthere\s*$", re.IGNORECASE)
_A_LIMIT_EXISTS = re.compile(r"(?:'s|is|are|was|were)\s+(?:a|an|one)\b", re.IGNORECASE)
# a share of a limit in the clause, as measured: "memory-bound at 40% of peak" (below HIGH_SHARE: no claim;
# "within 4% of peak" is a distance, not a share)
_SHARE_IN_CLAUSE = re.compile(
    r"(?<![\d.])(?<!within )(?<!within ~)(?<!last )(?<!final )(?<!remaining "
    r")(\d+(?:\.\d+)?)\s*%\s*(?:of\s+(?:the\s+)?(?:[\w-]+\s+)?"
    r"(?:peak|roofline|roof|sol|limit|max\w*|theoretical|bandwidth|throughput|capacity|copy|memcpy|hbm|dram|"
    r"speed[- ]of[- ]light|spec)|sol|utili[sz]ation|busy)|"
    r"\bat\s+(?:only\s+)?(\d+(?:\.\d+)?)\s*%|"
    r"\b(?:utili[sz]ation|throughput)\s+(?:is|of|at)\s+(?:only\s+|about\s+|~\s*)?(\d+(?:\.\d+)?)\s*%",
    re.IGNORECASE,
)
# a limit named as the subject of a value: "the practical limit is probably around 85% of peak"
_LIMIT_VALUE = re.compile(
    r"\b(?:limit|ceiling|peak|roofline|floor|minimum|maximum|bound|max|best (?:achievable|possible|attainable|case))"
    r"\b(?:\s+[\w-]+){0,5}?\s+(?:is|are|would be|'s)\b",
    re.IGNORECASE,
)

# -- the words after a match

# in its clause, words that put the claim in the past, the future, a part or another kernel: "was
# latency-bound before the pipelining", "for the naive version", "only in the prologue", "once it is
# fixed", "stop here for a moment"
_NOT_NOW = re.compile(
    r"\b(?:before (?:the|we|i|it|this|that|our|my|\w+ing)|until|till|earlier|previously|originally|initially|"
    r"at first|at the start|only|(?<!even )if|whether|in theory|in principle|on paper|theoretically|supposedly|"
    r"eventually|soon|later|"
    r"at some point|once|as soon as|unless|after (?:we|i|it|this|that) \w+|after the \w+ (?:is|are|gets|has|have|"
    r"lands|works)|for a (?:moment|bit|second|minute)|"
    r"briefly|temporarily|to (?:re-\w+|re(?:read|run|check|measure|profile|test)|look|check|think|profile|debug|"
    r"inspect|read)|"
    r"(?:in|with|for|on) the (?:old|previous|first|original|last) \w+|in (?:the )?(?:prologue|epilogue|warm-?up|"
    r"microbenchmark)|(?:in|on|for) (?:the |a )?(?:[\w-]+ )?micro-?benchmarks?|(?:with|in|on) the (?:compiler|build|"
    r"toolchain|driver|api|syntax|intrinsics?|linker|descriptors?|profiler|ncu|nsys|nsight|tools?|tooling|"
    r"debugger)|(?:on|for|with) (?:correctness|the tests|testing|debugging|the build|compil\w+))\b|"
    r"\b(?:for|to|on|in|of) (?:the |our |their )?(?:naive|reference|baseline|old|previous|original|other)\b|"
    r"\bof (?:our|this) current\b",
    re.IGNORECASE,
)
# right after it, words that make the claim's noun a value or deny it: "the best achievable number is
# around 0.3 ms", "a hard limit of 227 KB", "diminishing returns aren't a concern", "would be a reason"
_VALUE_OR_DENIED = re.compile(
    r"^\s*(?:[\w-]+\s+){0,2}?(?:is|are|would be|=|sits at|lies at)\s+(?:about\s+|around\s+|roughly\s+|"
    r"approximately\s+|~\s*)?\d|^\s*of\s+(?:about\s+|around\s+|roughly\s+|~\s*)?\d|"
    r"^\s*(?!(?:that|which|who)\b)(?:[\w-]+\s+)?(?:isn't|aren't|wasn't|weren't|is not|are not|doesn't|don't|"
    r"does not|do not)\b|^\s*yet\b|"
    r"^\s*(?:[\w-]+\s+){0,4}?(?:is|are|would be)\s+(?:much\s+|far\s+|a lot\s+|way\s+)?(?:better|faster|higher|lower)\s+"
    r"than\b|^\s*(?:would|might|may)\s+(?:be\s+(?:a|an|the)\b|set in|kick in|appear|show up|start)|"
    r"^\s*(?:[\w-]+\s+){0,2}?would\s+(?:mean|imply|indicate|suggest|put)\b|"
    r"^\s*(?:is|are)\s+(?:a|an)\s+(?:[\w-]+\s+)?(?:risk|danger|concern|possibility|question)\b",
    re.IGNORECASE,
)

# -- the sentence around a match

# a sentence that starts with a condition asserts nothing up to its first ; or :
_CONDITION_FIRST = re.compile(
    r"^\W*(?:if(?! (?:i'm|i am|we're|i'm being|i am being) (?:honest|frank|being honest))|once|when|whenever|unless|"
    r"until|till|assuming|suppose|supposing|provided|as soon as|"
    r"as long as|even if|in case|before)\b",
    re.IGNORECASE,
)
_CONDITION_END = re.compile(r"[;:\u2014]")
# ... unless the condition is other hardware: "unless NVIDIA ships faster memory, this won't get quicker"
_ONLY_NEW_HARDWARE = re.compile(
    r"^\W*unless\b[^,;]*\b(?:faster|new|newer|better|bigger|different)\s+(?:\w+\s+)?(?:memory|hbm|hardware|gpu|card|"
    r"chip|silicon)\b",
    re.IGNORECASE,
)
# a gerund that opens the sentence makes the claim its topic, not a statement: "reaching the limit will
# take two more changes", "saturating the bus is the next goal"
_GERUND_TOPIC = re.compile(r"(?:reach|hitt|achiev|approach|saturat|match|max|bump|gett)ing\b", re.IGNORECASE)
# what optimizing goes on with ("I'll try", "let's fuse", "splitting the tile")
_ACTIONS = (
    r"(?:try|test|add|cut|reduce|fuse|switch|use|compress|split|shrink|increase|decrease|lower|raise|drop|remove|"
    r"rewrite|restructure|reorder|unroll|pipeline|overlap|cache|tune|sweep|profile|measure|re-?measure|check|"
    r"look|re-?run|repeat|retry|revert|target|focus|attack|optimi[sz]e|improve|push|fix|pad|swizzle|change|"
    r"replace|implement|experiment|explore|investigate|apply|widen|narrow|hide|trim|vectori[sz]e|specialize|bump|"
    r"double|halve|prefetch|recompute|dig|work on|move on|keep (?:going|pushing|tuning|optimi[sz]ing|at it)|"
    r"continue|attempt|benchmark|compare|go (?:further|deeper|after|for)|see (?:if|whether|how)|rethink|revisit|"
    r"consider|inspect|analy[sz]e|dump|hoist|interleave|rebalance|balance|move|tile|avoid|shave|confirm|verify|"
    r"break|shorten)"
)
_GERUNDS = (
    r"(?:splitting|trying|switching|rerunning|re-running|retrying|repeating|reducing|cutting|fusing|rewriting|"
    r"restructuring|increasing|decreasing|lowering|raising|dropping|adding|removing|tuning|profiling|"
    r"testing|measuring|re-?measuring|investigating|exploring|attempting|trimming|unrolling|pipelining|reworking|"
    r"shrinking|changing|padding|swizzling|widening|going back|looking|digging|falling back|reverting|"
    r"rebalancing|overlapping|caching|prefetching)"
)
# the sentence, outside the claim, says the work goes on or that there is room, or takes the claim back:
# a plan ("next I'll cut loads", "let me try FP8", "swizzling should help", "splitting the tile", not a gerund
# that is a subject: "profiling shows"), room
# ("there's still headroom", "room left"), a contrast ("but the profiler shows 40%"), a retraction
# ("scratch that", "I was wrong")
_GOES_ON = re.compile(
    r"\b(?:i'll|i will|i'm going to|i am going to|we'll|we will|we're going to|we are going to|let's|let me|let us|"
    r"i plan to|we plan to|planning to|i need to|we need to|i want to|we want to|i'd like to|which i'll|"
    r"which we'll|(?:and|then) (?:will|'ll)|next,? (?:i|we)(?:'ll| will)?|then (?:i|we)(?:'ll| will)|"
    r"(?<!what )(?<!that )(?<!all )(?<!as far as )"
    r"(?:i can|we can|we could|i could)|"
    r"i should|we should|time to)\s+(?:(?:\w+ly|also|now|next|first|instead|just)\s+)*" + _ACTIONS + r"\b|"
    r"(?:[;:,(\u2014\u2013]|\bso\b|\band\b|\bnow\b|\b(?:i'm|i am|we're|we are)\b)\s*(?:now\s+|next\s+|instead\s+)?"
    + _GERUNDS
    + r"\b(?!\s+(?:shows?|showed|says?|said|confirms?|confirmed|reports?|reported|suggests?|indicates?)\b)|"
    r"\bnext (?:step|move|lever|thing|target|goal|job|task|idea|gain|win|speedup|improvement|bottleneck)\b|\b(?:the|"
    r"my|our) (?:plan|fix|remedy|cure|"
    r"solution) is\b|\bthe way forward\b|\b(?:is|as) (?:the|our|my) (?:next )?(?:goal|aim|target|priority|"
    r"objective)\b|\bwhich (?:\w+ ){0,3}?(?:will|should|would|can) (?:fix|help|solve|remove)\b|\b(?:should|will|"
    r"ought to) "
    r"(?:help|fix (?:it|this|that)|win|be faster)\b|\bto fix (?:this|it|that)\b|\binstead\b|\bmoving (?:on )?to\b|"
    r"\btells? us to\b|\bmeans? (?:we|i) (?:should|need|can)\b|\bnext (?:is|up|comes|on the list)\b|\b(?:that's|"
    r"that is|this is) next\b|\b(?:so )?on to\b|"
    r"\bbut\b[^.;]{0,40}?(?:\b(?:at|is|only)\s+)?\d+(?:\.\d+)?\s*%|"
    r"(?:\bnot|n't)\s+(?:\w+\s+)?(?:coalesced|pipelined|overlapped|vectori[sz]ed|fused|tiled|optimi[sz]ed|hidden|"
    r"balanced|"
    r"tuned)\s+yet\b|"
    r"\b(?:have|got|there are|still)\s+(?!no\b|nothing\b|none\b)(?:\w+\s+){0,2}?(?:changes?|ideas?|things?|options?|"
    r"tricks?|levers?)\s+left\b|\b(?:can|could)\s+(?:still\s+)?(?:get|go|be made|run|become)\s+(?:much\s+|a lot\s+|"
    r"significantly\s+|far\s+|way\s+)?faster\b|\bbut\b[^.;]{0,40}?\bstill\b|\b(?:obvious|clear|easy) (?:fix|win|"
    r"improvement|gain)\b|\b(?:the new|now it|now the \w+)\b[^.;]{0,30}?\b(?:faster|better|quicker)\b|"
    r"\b(?:but|yet|though)\s+(?:the\s+)?(?:profil\w+|ncu|nsight|counters?|numbers?|data|measurements?|timings?)\s+"
    r"(?:shows?|says?|disagrees?|suggests?|tells?|points?)\b|"
    r"\b(?:there's|there is|there are|we have|we've got|leaves|leaving|with|still)\s+(?:still\s+)?(?:plenty of\s+|"
    r"lots of\s+|a lot of\s+|some\s+|significant\s+|considerable\s+|more\s+|real\s+|much\s+)?(?:room|headroom|"
    r"slack|upside|potential)\b|"
    r"(?<!no )(?<!little )(?<!much )(?<!zero )(?<!any )\b(?:room|headroom) (?:left|remaining|to (?:improve|grow|"
    r"gain|spare))\b|(?<!not )(?<!no )(?<!nothing )\b(?:lots|plenty|much|a lot|more) to (?:gain|squeeze|win|get)\b|"
    r"\b(?:can|could) "
    r"still\b|\bstill (?:room|possible|improvable|on the table)\b|"
    r"\bnot because\b|\b(?:maybe|perhaps) not\b|\beither way\b|\b(?:hard|too (?:early|soon)) to (?:say|tell)\b|"
    r"\bdisagree\b|\b(?:is|are|was|were) (?:outdated|out of date|stale|no longer (?:true|accurate|correct))\b|"
    r"\bstill worth\b|\b(?:going|about) to\s+" + _ACTIONS + r"\b|"
    r"\b(?:has|have|had)\s+(?:plenty of|lots of|a lot of|some|more)\s+(?:room|headroom|slack)\b|"
    r"\b(?:hasn't|haven't|has not|have not|not)\s+(?:even\s+)?(?:been\s+)?(?:tried|attempted|explored)(?:\s+yet)?\b|"
    r"\bnot what (?:we're|we are|i'm|i am) (?:optimi[sz]ing|working on|tuning|measuring)\b|"
    r"(?<![\d.])(?:[5-9]|[1-9]\d)(?:\.\d+)?\s*%\s+(?:more\s+)?(?:to (?:find|gain|go|win|get|squeeze|recover|close|"
    r"take)|left|remaining|"
    r"on the table|(?:of )?headroom)\b|"
    r"\b(?:plenty of|lots of|a lot of|significant|considerable|substantial|ample)\s+(?:room|headroom|slack|upside)\b|"
    r"\bstill (?:has |have )?(?:a|an|some|a (?:big|large|real|decent|clear|wide))\s+(?:[\w-]+\s+)?(?:gap|way to go|"
    r"distance)\b|"
    r"\b(?:a|the) gap to (?:close|explain|chase)\b|"
    r"\bstill (?:open|in progress|ongoing|pending|wip|unsolved|unresolved)\b|"
    r"\b(?:we're|we are|i'm|i am|it's|it is|this is|that's|that is)\s+not\s+(?:yet\s+)?done\b|\bnot done yet\b|"
    r"\b(?:i|we) doubt (?:we|it|this|that|the \w+)\b[^.;]{0,30}?\b(?:found|reached|hit|at|near)\b|"
    r"\b(?:don't|do not|doesn't|does not) (?:think|believe)\b[^.;]{0,40}?\b(?:optimal|at (?:the |its )?(?:limit|peak|"
    r"roofline|ceiling)|done|the best|as fast as)\b|"
    r"^\W*(?:[\w-]+\s+){1,3}next\W*$|"
    r"^\W*(?:tomorrow|tonight|todo|to-?do|follow-?ups?|remaining work|open items?)\s*:|"
    r"\b(?:should|will)\s+(?:free|save|gain|buy|recover|shave|win)\b(?!\s+(?:at most|only|just|little|less|nothing))|"
    r"\b(?:was|were) (?:wrong|mistaken|incorrect|premature)\b|"
    r"\b(?:nowhere near|far from|not (?:yet )?(?:near|close to))\s+as\s+(?:fast|good|quick)\s+as\b|"
    r"\b(?:isn't|is not|aren't|are not|wasn't|weren't|not)\s+(?:by itself\s+|really\s+|yet\s+)?at\s+(?:the|a|our|any|"
    r"its)\s+"
    r"(?:[\w-]+\s+)?(?:ceiling|limit|floor|roof|roofline|wall|peak|hardware|silicon|bandwidth)\b|"
    r"\bnot even close\b|\bnowhere close\b|,?\s+not (?:by )?(?:the )?(?:hardware|gpu|silicon|device|physics)\b|"
    r"\b(?:could|can|would|might) make (?:it|this|the \w+)\s+(?:much\s+|a lot\s+|significantly\s+|far\s+|"
    r"way\s+)?faster\b|\b(?:isn't|is not|aren't|are not)\s+by itself\b|"
    r"\bnot (?:yet )?(?:the )?end of the (?:road|line)\b|\bend of the (?:road|line) yet\b|"
    r"\bno longer (?:think|believe)\b|"
    r"\b(?:further|more|additional|another)\s+(?:[\w-]+\s+){0,2}?(?:gains?|improvements?|speed-?ups?|speed|"
    r"optimi[sz]ations?|"
    r"wins?)\s+(?:(?:is|are|would be|seems?|looks?)\s+)?(?:very\s+|quite\s+|still\s+|definitely\s+|clearly\s+)?"
    r"(?:possible|realistic|likely|available|achievable|to be had)\b|"
    r"\b(?:expect|see|seeing|anticipate)\s+(?:\w+\s+){0,2}?(?:further|more|additional)\s+(?:gains?|improvements?|"
    r"speed-?ups?|opportunities)\b|"
    r"\bcan be (?:pushed|made|taken)\s+(?:much\s+|a lot\s+|significantly\s+|far\s+)?(?:further|faster)\b|"
    r"\bha(?:s|ve) (?:far |much |a lot )?more to give\b|"
    r"\b(?:haven't|hasn't|have not|has not)\s+(?:yet\s+)?(?:reached|hit|approached)\b|"
    r"\b(?:don't|do not|doesn't|does not|can't|cannot|not)\s+(?:\w+\s+)?(?:think|believe|consider|conclude|"
    r"ready to call|"
    r"confident)\b[^.;]{0,40}?\b(?:reached|hit|done|optimal)\b|"
    r"\bno reason to (?:believe|think|stop)\b|\bnothing (?:suggests|indicates|says)\b|\bcan't be the best\b|"
    r"\b(?:we're|we are|it's|it is|ours is)\s+(?:still\s+)?(?:far|a long way|miles|well short)\s+(?:from|off|below)\b|"
    r"\b(?:is|are|clearly|definitely|still)\s+(?!not\b|never\b|hardly\b)(?:\w+\s+)?(?:warranted|justified|worth it|"
    r"worth (?:doing|pursuing|the effort))\b|^\W*worth (?:doing|it|more|another|a (?:couple|few)|further|pursuing)\b|"
    r"\b(?:remaining|further) (?:optimi\w+|gains?|work|headroom|upside) is real\b|"
    r"(?<![\d.])(?:1[5-9]|[2-9]\d)(?:\.\d+)?\s*%\s+(?:off|short of|below|under|away from)\b|"
    r"\b(?:number|target|bar|baseline|one) to beat\b|\bnumbers? to compare (?:against|with|to)\b|"
    r"\b(?:our\s+[\w-]+|ours|the kernel|we)\s+(?:only\s+)?(?:gets?|reach(?:es)?|hits?|is at|are at|runs at|"
    r"achieves?|sits at)\s+(?:only\s+|about\s+|~\s*)?[1-7]?\d(?:\.\d+)?\s*%|"
    r"\bnow\s+(?:at\s+|only\s+)+[1-7]?\d(?:\.\d+)?\s*%|\bcould (?:likely |probably |still )?go (?:further|faster)\b|"
    r"\bstill\s+(?:maybe\s+|probably\s+|perhaps\s+|about\s+|~\s*)?\d+(?:\.\d+)?\s*%\s+(?:to (?:gain|go|win)|left|"
    r"on the table)|"
    r"\b(?:due to|because of|owing to)\s+(?:the\s+|my\s+|our\s+|a\s+)?(?:\d+[- ](?:hour|minute|day)\s+)?(?:time|"
    r"budget|deadline|time budget|time limit|request|failing tests?|tests?|build|ci)\b|\bout of (?:time|budget)\b|"
    r"\b(?:takes?|took|taking) too long\b|\bfor (?:the|this) (?:evening|night|day|weekend)\b|\bfor (?:today|tonight)\b|"
    r"\b(?:user|you|they|reviewer|manager)\s+(?:asked|told|requested|wants?)\s+(?:me|us)\s+to\s+stop\b|"
    r"\bdisput\w*\b|\bpush(?:es|ed)? back\b|\b(?:they're|they are|you're|you are) right\b|"
    r";\s*(?:but\s+)?(?:our (?:[\w-]+ )?kernel|ours|the kernel|we)(?:'re|\s+(?:is|are|get|gets|reach|reaches|hit|hits|"
    r"run|runs))\s+(?:at\s+|only\s+)*\d|"
    r"\bwhile\b[^.;]{0,60}?(?<![\d.])[1-7]?\d(?:\.\d+)?\s*%|"
    r"\bactually,? (?:no|not)\b|\bwait,? (?:no|not)\b|"
    r"\b(?:nowhere near|far from|not (?:yet )?(?:at|near|close to))\s+(?:the\s+|a\s+|any\s+|its\s+)?(?:[\w-]+\s+)?"
    r"(?:wall|limit|roofline|peak|ceiling|bound)\b|\b(?:far|well|way) below what\b|"
    r"\b(?:isn't|is not|aren't|are not)\s+(?:the|a|our|any)\s+(?:[\w-]+\s+)?"
    r"(?:ceiling|limit|floor|roof|roofline|wall)\b|\b(?:ceiling|limit|floor|roof|roofline|wall)\s+(?:isn't|is not)\b|"
    r"\b(?:scratch|strike) (?:that|this|my|the)\b|\bon second thought\b|"
    r"\b(?:i was|that was|i'm) wrong\b|\bpremature\b|\bi stand corrected\b|\bcorrection\b|\bnever ?mind\b|"
    r"\bnot quite\b|\bproved? (?:me|that|it) wrong\b|\b(?:says?|shows?) otherwise\b|\bwrong kernel\b",
    re.IGNORECASE,
)
# ... unless its own clause says the work is futile: "adding instructions only slows it down"
_FUTILE = re.compile(r"\bslow\w* (?:it |things |us )?down\b|\bhurts?\b|\bslower\b|\bworse\b", re.IGNORECASE)
# a sentence that takes back the one before, or disputes it: "Actually no, ncu shows 60%.", "I don't buy it:
# we still read the input twice."
_TAKES_BACK = re.compile(
    r"^\W*(?:actually|wait|hmm+|correction|scratch that|strike that|on second thought|no\b(?=\s*(?:[,.!;:\u2014-]|$))|"
    r"not quite|never ?mind|"
    r"i was wrong|that's wrong|that was wrong|hold on|oops|i (?:disagree|don't (?:agree|buy|think so)))\b|"
    r"^\W*(?:that's|that is|it's|it is|this is)\s+(?:nowhere near|far from|not (?:at|near|close to))\b",
    re.IGNORECASE,
)
# the parts of a sentence that open like one: "Working around it; current throughput is 40% of copy."
_OPENINGS = re.compile(r"[;:\u2014]")
HIGH_SHARE = 0.85  # a measured share of a limit at least this high claims the limit
# a sentence about the kernel at hand, or a contrast, that measures it (see _low_share): "We're at 58% on the
# L4, though.", "Ours is at 74%.", "But the conv kernel is only at 60% of peak."
_MEASURES_OURS = re.compile(
    r"^\W*(?:but|though|however|yet|ours|our|we're|we are|it's|it is|the kernel|this kernel|"
    r"(?:[\w-]+\s+){0,2}(?:utili[sz]ation|throughput)\s+is|(?:achieved|measured|effective)\s+(?:[\w-]+\s+)?"
    r"(?:bandwidth|throughput|utili[sz]ation)\s+is)\b",
    re.IGNORECASE,
)


def _sentences(text: str) -> list[str]:
    return [s for s in _SENTENCE_END.split(text) if s.strip()]


def _share(groups: dict) -> float | None:
    """The share of a limit that a match's numbers give, or None without numbers. The patterns name them
    (a name may end in a digit, to be used twice): `got` of `peak` (a rate against its limit), `floor`
    over `took` (a time against its limit), a percentage `pct`, a fraction `frac` (the digits after its
    point), a distance `gap` in percent."""
    g: dict[str, str] = {}
    for name, value in groups.items():
        if value is not None:
            g.setdefault(name.rstrip("0123456789"), value)
    if "got" in g and "peak" in g:
        part, whole = float(g["got"]), float(g["peak"])
    elif "floor" in g and "took" in g:
        part, whole = float(g["floor"]), float(g["took"])
    elif "pct" in g:
        return float(g["pct"]) / 100
    elif "frac" in g:
        return float("0." + g["frac"])
    elif "gap" in g:
        return 1 - float(g["gap"]) / 100
    else:
        return None
    return part / whole if whole else None


# a clause that goes on with the subject before it ("ours is latency-bound and sits at 55%")
_CONTINUES = re.compile(
    r"^\W*(?:only\s+|still\s+|now\s+)?(?:sits|sitting|runs|running|stays|gets|reaches|hits|achieves|is|at)\b",
    re.IGNORECASE,
)


def _low_share_goes_on(rest: str) -> bool:
    """Whether a clause of `rest` (the sentence after a match's clause) that goes on with its subject or
    measures the kernel at hand measures a low share: "... and sits at 55%", "... and achieved bandwidth is
    1.1 TB/s of 3.35" (not "; the naive version was at 40%", "; DRAM is at 40%")."""
    starts = [b.end() for b in _CLAUSE_BREAK.finditer(rest)]  # (the rest opens with a break)
    clauses = [rest[a:b] for a, b in zip(starts, [*starts[1:], len(rest)])]
    return any((_CONTINUES.match(c) or _MEASURES_OURS.match(c)) and _low_share(c) for c in clauses)


def _high_share(sentence: str) -> bool:
    """Whether the sentence measures a share of a limit of at least HIGH_SHARE ("tensor cores at 88%")."""
    return any(float(a or b or c) / 100 >= HIGH_SHARE for a, b, c in _SHARE_IN_CLAUSE.findall(sentence))


# a rate against another, a unit on either: "1.1 TB/s of 3.35", "2.1 of 3.35 TB/s"
_RATE_PAIR = re.compile(
    r"(?<![\d.])(\d+(?:\.\d+)?)\s*([gt]b/s|tflop/?s|tflops)?\s*(?:/|\bout of\b|\bof\b)\s*(?:the\s+|a\s+|an\s+)?"
    r"(?:~\s*|about\s+|roughly\s+)?(\d+(?:\.\d+)?)\s*([gt]b/s|tflop/?s|tflops)?",
    re.IGNORECASE,
)


def _low_share(clause: str) -> bool:
    """Whether the clause measures a share of a limit below HIGH_SHARE ("memory-bound at 40% of peak", "1.1
    TB/s of 3.35")."""
    return any(float(a or b or c) / 100 < HIGH_SHARE for a, b, c in _SHARE_IN_CLAUSE.findall(clause)) or any(
        (u1 or u2) and float(d) and float(n) / float(d) < HIGH_SHARE for n, u1, d, u2 in _RATE_PAIR.findall(clause)
    )


# going on to other work, after a claim, is consistent with it: "moving on to the backward"
_MOVES_ON = re.compile(r"moving|(?:so )?on to\b|next (?:is|up|comes|on the list)\b", re.IGNORECASE)


def _taken_back(after: str, before: _Limits, next_one: bool) -> bool:
    """Whether a sentence after a claim takes it back: it measures the kernel at hand at a low share of its
    limit, at a rate or time well below one named `before` (in the text up to it, see _limits), calls it
    slow or says there is room (_ROOM); or, the `next_one` after it, it retracts the claim (_TAKES_BACK) or
    says that the work on it goes on (_plans, not moving on to other work)."""
    return bool(
        (next_one and _TAKES_BACK.search(after))
        or any(_MEASURES_OURS.search(c) and _low_share(c) for c in _OPENINGS.split(after))
        or _low_measure(before, after)
        or _STILL_SLOW.search(after)
        or any(not _MOVES_ON.match(g.group(0)) and (next_one or _ROOM.search(g.group(0))) for g in _plans(after))
    )


# a sentence after a claim that calls the kernel slow: "The kernel itself is what we should be timing, and it's slow."
_STILL_SLOW = re.compile(
    r"\b(?:it's|it is|(?:the )?kernel is|(?:is|are) still|still)\s+(?:still\s+|really\s+|very\s+|quite\s+|too\s+)?"
    r"slow\b(?!\s+down)",
    re.IGNORECASE,
)
# what a later sentence says of the kernel at hand, not of other work: room, worth, a distance from the limit
_ROOM = re.compile(
    r"room|headroom|slack|upside|gap|worth|warranted|justified|to (?:find|gain)|to give|possible|realistic|"
    r"far from|nowhere near|not (?:yet |even )?(?:at|near|close)|short of|below|under|off\b",
    re.IGNORECASE,
)


# a rate measured: "we're at 3.1", "the layernorm gets 1.8", "our reduction gets 11 GB/s" (a number with a unit
# that is not a rate's, "at 61 ms", is not one)
_MEASURED = re.compile(
    r"\b(?:at|gets?|got|hits?|hitting|reach(?:es)?|seeing|sees?|manages?|achieves?|sustains?|takes?)\s+"
    r"(?:only\s+|about\s+|around\s+|roughly\s+|~\s*)?(\d+(?:\.\d+)?)\s*(?:([gt](?:b/s|flop/?s|flops)|[mun\u00b5]?s)\b|"
    r"(?!\s*(?:[a-z%/]|\.\d)))",
    re.IGNORECASE,
)
# a time, in microseconds: "0.33 ms", "4 us"
_TIME = re.compile(r"(\d+(?:\.\d+)?)\s*([mun\u00b5]?s)\b", re.IGNORECASE)
_TIME_SCALE = {"s": 1e6, "ms": 1e3, "us": 1.0, "\u00b5s": 1.0, "ns": 1e-3}


# the rates (in G units, as written, their kind) and times (in microseconds) that a text names
_Limits = tuple[tuple[tuple[float, float, str], ...], tuple[float, ...]]


def _limits(text: str) -> _Limits:
    """The rates and the times that `text` names (see _Limits)."""
    rates = tuple((float(n) * _PREFIX[p.lower()], float(n), _kind(kind)) for n, p, kind in _RATE.findall(text))
    return rates, tuple(float(n) * _TIME_SCALE[u.lower()] for n, u in _TIME.findall(text))


def _low_measure(before: _Limits, sentence: str) -> bool:
    """Whether `sentence` measures a rate below HIGH_SHARE of the highest rate of its kind named `before`
    ("4.8 TB/s spec. We're at 3.1.": a number without a unit read in the unit that rate is written in), or
    a time that the shortest time named `before` is below HIGH_SHARE of ("the floor is 0.33 ms. We're at
    0.61 ms.")."""
    rates, times = before
    for n, unit in _MEASURED.findall(sentence):
        value, unit = float(n), unit.lower()
        if unit in _TIME_SCALE:
            low = bool(times) and min(times) < HIGH_SHARE * value * _TIME_SCALE[unit]
        elif unit:
            ((kind, rate),) = _rates(f"{n} {unit}").items()
            limits = [v for v, _, k in rates if k == kind]
            low = bool(limits) and rate < HIGH_SHARE * max(limits)
        else:
            raws = [r for _, r, _ in rates]
            low = bool(raws) and 0.05 * max(raws) <= value < HIGH_SHARE * max(raws)
        if low:
            return True
    return False


# a rate, its unit's prefix and kind: "280 GB/s", "4.8 TB/s", "600 TFLOPS"
_RATE = re.compile(r"(\d+(?:\.\d+)?)\s*([gt])(b/s|flop/?s)", re.IGNORECASE)
_PREFIX = {"g": 1, "t": 1000}  # a rate's prefix, in G


def _kind(unit: str) -> str:
    """A rate's kind, its unit without the prefix: "b/s", or "flop/s" however it is written ("TFLOPS",
    "TFLOP/s")."""
    return unit.lower().replace("flops", "flop/s")


def _rates(text: str) -> dict[str, float]:
    """The last rate of each kind in `text`, in G units: {"b/s": 280.0}."""
    return {_kind(kind): float(n) * _PREFIX[p.lower()] for n, p, kind in _RATE.findall(text)}


def _low_rate(before: str, phrase: str) -> bool:
    """Whether the sentence before a match measures a rate below HIGH_SHARE of the limit's rate that the match
    names: "I'm seeing 280 GB/s on the M2 Max against a 400 GB/s spec"."""
    got, limit = _rates(before), _rates(phrase)
    return any(kind in got and got[kind] < HIGH_SHARE * v for kind, v in limit.items())


# a judgement that the work is worth it, which a denial before it in its clause turns round ("I don't think any
# further change is worth doing")
_WORTH = re.compile(
    r"\bworth|\bwarranted|\bjustified|\b(?:possible|realistic|likely|available|achievable|to be had)$|"
    r"^(?:expect|see|anticipate)|more to give$",
    re.IGNORECASE,
)


def _plans(sentence: str) -> list[re.Match]:
    """The words of the sentence that say the work goes on (a plan whose own clause denies nothing: not
    "tuning it further won't help"), that there is room, or that take a claim back."""
    found = []
    for g in _GOES_ON.finditer(sentence):
        clause_end = next((b.start() for b in _CLAUSE_BREAK.finditer(sentence, g.end())), len(sentence))
        breaks = [b.end() for b in _CLAUSE_BREAK.finditer(sentence, 0, g.start())]
        lead = sentence[breaks[-1] if breaks else 0 : g.start()]
        if not (
            _DENIAL.search(sentence[g.end() : clause_end])
            or _FUTILE.search(sentence[g.end() : clause_end])
            or (_WORTH.search(g.group(0)) and _DENIAL.search(_NOT_A_DENIAL.sub(" ", lead)))
        ):
            found.append(g)
    return found


def _goes_on(sentence: str, m: re.Match) -> bool:
    """Whether the sentence, outside the claim `m`, says that the work goes on (see _plans)."""
    return any(not (g.start() < m.end() and g.end() > m.start()) for g in _plans(sentence))


def _a_topic(sentence: str, m: re.Match) -> bool:
    """Whether the match opens the sentence as its topic: a gerund ("reaching the limit will take two
    changes") or "at" and a comma ("at peak, the H200 moves 4.8 TB/s")."""
    if sentence[: m.start()].strip():
        return False
    phrase = m.group(0)
    return bool(_GERUND_TOPIC.match(phrase)) or (
        phrase.lower().startswith("at ") and sentence[m.end() :].startswith(",")
    )


def _qualified(lead: str, inner: str, trail: str, rest: str) -> bool:
    """Whether the words around a match take its claim away: `lead` (its clause before it), `inner` (its
    own words before its `claim` group), `trail` (its clause after it), `rest` (the sentence after it)."""
    return bool(
        _DENIAL.search(_NOT_A_DENIAL.sub(" ", lead + " " + inner))
        or _NOT_ASSERTED.search(lead)
        or _NOT_ASSERTED.search(inner)
        or (_HYPOTHETICAL.search(lead) and not _FURTHER_WORK.search(lead))
        or _NOT_OURS.search(lead)
        or _PART_ONLY.search(lead)
        or _GENERAL.search(lead)
        or _OTHERS_SUBJECT.search(lead)
        or _LIMIT_VALUE.search(lead)
        or _NOT_NOW.search(trail)
        or _GENERAL_AFTER.search(trail)
        or _VALUE_OR_DENIED.search(rest)
    )


# words in quotes are cited, not asserted: "scratch my 'nothing left to do' comment", "the reviewer pushed
# back on 'at peak'", "saying 'we're at peak' needs a baseline" (an apostrophe within a word stays inside)
_QUOTED = re.compile(
    r"(?:(?<=[\s(])|^)(?:'(?P<single>(?:[^'\n]|(?<=\w)'(?=\w)){2,80})'|"
    r"\u2018(?P<curly>(?:[^\u2019'\n]|(?<=\w)'(?=\w)){2,80})['\u2019]|"
    r"\"(?P<double>[^\"\n]{2,120})\"|\u201c(?P<curly2>[^\u201d\n]{2,120})\u201d)(?=[\s.,;:!?)]|$)"
)

# a line quoted from elsewhere, markdown style: "> this kernel is optimal" (then "I disagree: ...")
_CITED_LINE = re.compile(r"^\s*>")


def _asserted(sentence: str, m: re.Match) -> bool:
    """Whether the match is asserted: not in a question or in quotes; not taken away by the words around it
    (see _qualified); not under a condition that opens the sentence, nor its topic; its numbers, where it
    names some, close to the limit; and the rest of the sentence not going on with the work."""
    if sentence.rstrip().endswith("?") or _CITED_LINE.match(sentence):
        return False
    # (each quote's words are its one named group that matched)
    quotes = [q.span(str(q.lastgroup)) for q in _QUOTED.finditer(sentence)]
    if any(start <= m.start() and m.end() <= end for start, end in quotes):
        return False
    # (an aside blanked out, its length kept)
    plain = _ASIDE.sub(lambda a: " " * len(a.group(0)), sentence)
    breaks = [b.end() for b in _CLAUSE_BREAK.finditer(plain, 0, m.start())]
    lead = plain[breaks[-1] if breaks else 0 : m.start()]
    label = _LABEL.match(sentence)
    said = label.group(1) if label and label.end() <= m.start() else ""
    if _NOT_ASSERTED.search(said) or _NOT_OURS.search(said) or _GENERAL.search(said):
        return False
    inner = sentence[m.start() : m.start("claim")] if "claim" in m.re.groupindex else ""
    after = next((b.start() for b in _CLAUSE_BREAK.finditer(sentence, m.end())), len(sentence))
    trail = sentence[m.end() : after]
    if (
        _qualified(lead, inner, trail, sentence[m.end() :])
        or _a_topic(sentence, m)
        or _low_share(lead + " " + trail)
        or (_low_share_goes_on(sentence[after:]) and not _high_share(sentence))
        or _low_rate(sentence[: m.start()], m.group(0))
        or (_THERE.search(lead) and _A_LIMIT_EXISTS.match(m.group(0)))
    ):
        return False
    if _CONDITION_FIRST.search(sentence) and not _ONLY_NEW_HARDWARE.search(sentence):
        first = _CONDITION_END.search(sentence)
        if first is None or m.start() < first.start():
            return False
    share = _share(m.groupdict())
    if share is not None and share < HIGH_SHARE:
        return False
    return not _goes_on(sentence, m)


def claimed_limit(text: str | None, patterns: tuple[str, ...]) -> dict | None:
    """The first claim of a limit in `text` (an asserted one, see _asserted, in a sentence that no later one
    takes back, see _undermined): the phrase, its sentence and the pattern that found it."""
    if not text:
        return None
    sentences = _sentences(text.replace("\u2019", "'"))
    undermined = _undermined(sentences)
    for i, sentence in enumerate(sentences):
        found = [
            (m.start(), m, pat)
            for pat in patterns
            for m in re.finditer(pat, sentence, re.IGNORECASE)
            if _asserted(sentence, m)
        ]
        if found and not undermined[i]:
            _, m, pat = min(found, key=lambda f: f[0])
            return {"phrase": m.group(0), "sentence": _shown(sentence), "pattern": pat}
    return None


# ---- the run's own model decides; a word filter decides what it is asked; the rules stand in

# a sentence with none of these words, and no match of the patterns, claims no limit and is not sent to the
# model
_LIMIT_WORDS = re.compile(
    r"\b(?:limit\w*|bound\w*|bottleneck\w*|peak\w*|roofline|ceiling|floor|maximum|max\w*|minimum|optimal\w*|"
    r"optimi[sz]\w*|optimum|ideal|saturat\w*|faster|fastest|quicker|speed\w*|improv\w*|gains?|headroom|room|slack|"
    r"physic\w*|hardware\w*|silicon|device|gpu|amdahl\w*|best|achievab\w*|attainab\w*|possible|impossible|close|"
    r"near\w*|balanced|busy|full\w*|pegged|flat[- ]out|tilt|theoretical|fundamental|bandwidth|throughput|"
    r"utili[sz]\w*|squeez\w*|extract\w*|exhaust\w*|nothing|noise|negligible|marginal|diminishing|wall|done|final\w*|"
    r"can't|cannot|won't|couldn't|unable|efficien\w*|inefficien\w*|capacity|dominat\w*|unavoidable|fast\w*|"
    r"no amount|spec|sol|line rate|overlap\w*|hidden|pay\w*|worth\w*|wast\w*|ideas?|stop\w*|topped|"
    r"beat\w*|plateau\w*|converg\w*|explored|tried|resolution|advis\w*|suggest\w*|recommend\w*|conclu\w*|"
    r"wrap\w*|call it|rounding|sorry|afraid|unfortunately|regret\w*|give up|gave up|dead end|mercy|payoff|"
    r"returns?|juice|stuck|closer)\b|"
    r"\bas \w+ as (?:it|this|we|one)\b|\b(?:run|ran|running) out of\b|\bblood (?:out of|from)\b",
    re.IGNORECASE,
)
CLASSIFY_MAX_CHARS = 2000  # the end of a longer text is classified
CLASSIFY_INSTRUCTIONS = """\
You label one message written by an agent that is optimizing a GPU kernel. Answer CLAIM if the \
message asserts, even hedged ("probably", "I think"), that the kernel is at or near a performance \
limit (of the hardware, memory bandwidth, compute, physics, Amdahl's law, a roofline, the best \
achievable), that it cannot be made meaningfully faster, that further work is not worth it \
(diminishing returns, gains within the noise), or if it gives up or recommends stopping for that \
reason. Answer NO if it does not: a question, a plan to go on, a goal, a denial ("not memory-bound"), \
a condition ("if it were compute-bound"), a claim taken back, a limit since lifted, a limit of another \
kernel or of the configuration (registers, shared memory, a --limit flag), or the same words in another \
sense ("the loop is bound by n"). Reply with one word, CLAIM or NO, on the first line; after CLAIM, \
quote the sentence that makes the claim on the second line."""
_VERDICT = re.compile(r"^\W*(?:(?P<claim>claim)|no)\b", re.IGNORECASE)

# (text, candidate sentences, the rules' finding) -> (claim?, the sentence quoted), or None: no verdict
Classifier = Callable[[str, list[str], "dict | None"], "tuple[bool, str | None] | None"]


def _shown(sentence: str) -> str:
    """A sentence as evidence: whitespace-normalized, its first 300 characters."""
    return " ".join(sentence.split())[:300]


def _undermined(sentences: list[str]) -> list[bool]:
    """For each sentence, whether a sentence after it takes a claim in it back (see _taken_back: a retraction
    or a plan only in the next one)."""
    # the rates and times named before each sentence
    before: list[_Limits] = [((), ())]
    for sentence in sentences[:-1]:
        rates, times = _limits(sentence)
        before.append((before[-1][0] + rates, before[-1][1] + times))
    undone = [False] * len(sentences)
    later = False  # whether a sentence after the one at hand's next takes back
    for j in range(len(sentences) - 1, 0, -1):
        undone[j - 1] = later or _taken_back(sentences[j], before[j], True)
        later = later or _taken_back(sentences[j], before[j], False)
    return undone


def _candidates(text: str, patterns: tuple[str, ...]) -> tuple[list[str], list[int]]:
    """The sentences of `text`, and the indices of those that could claim a limit: a word of _LIMIT_WORDS or
    a match of `patterns`, not a question."""
    sentences = _sentences(text.replace("\u2019", "'"))
    return sentences, [
        i
        for i, s in enumerate(sentences)
        if not s.rstrip().endswith("?")
        and (_LIMIT_WORDS.search(s) or any(re.search(p, s, re.IGNORECASE) for p in patterns))
    ]


def claim_candidates(text: str | None, patterns: tuple[str, ...] = ()) -> list[str]:
    """The sentences of `text` that could claim a limit (see _candidates), whitespace-normalized: what the
    model is asked about."""
    if not text:
        return []
    sentences, chosen = _candidates(text, patterns)
    return [_shown(sentences[i]) for i in chosen]


def fallback_candidates(text: str, patterns: tuple[str, ...]) -> list[str]:
    """The candidate sentences that the fallback model (claim_model.py) is asked about: those that say
    nothing of the work going on (see _plans), that measure no low share of a limit, that no later sentence
    takes back (see _undermined) and that are not a line quoted from elsewhere."""
    sentences, chosen = _candidates(text, patterns)
    undermined = _undermined(sentences) if chosen else []
    return [
        _shown(sentences[i])
        for i in chosen
        if not (
            _plans(sentences[i])
            or (_low_share(sentences[i]) and not _high_share(sentences[i]))
            or undermined[i]
            or _CITED_LINE.match(sentences[i])
        )
    ]


def classification_messages(text: str) -> list[dict]:
    """The classification call's conversation: the instructions, then the text (its last
    CLASSIFY_MAX_CHARS characters)."""
    return [
        {"role": "system", "content": CLASSIFY_INSTRUCTIONS},
        {"role": "user", "content": text[-CLASSIFY_MAX_CHARS:]},
    ]


def parse_verdict(content: str | None) -> tuple[bool, str | None] | None:
    """(claim?, the sentence quoted after CLAIM) from the model's answer, read on its first line (or
    its last, after a preamble); None when it answers neither CLAIM nor NO."""
    lines = [l.strip() for l in (content or "").splitlines() if l.strip()]
    if not lines:
        return None
    first = _VERDICT.match(lines[0])
    if first:
        claim = first.group("claim") is not None
        quote = (lines + [""])[1].strip(" \"'\u201c\u201d`*>") if claim else ""
        return claim, quote or None
    last = _VERDICT.match(lines[-1])
    return None if last is None else (last.group("claim") is not None, None)


def _quoted(candidates: list[str], quote: str | None) -> str | None:
    """The candidate sentence the model quoted (one holding the other, case and spacing aside)."""
    if not quote:
        return None
    q = " ".join(quote.split()).lower()
    return next((c for c in candidates if q in c.lower() or c.lower() in q), None)


def decide_claim(
    text: str | None, patterns: tuple[str, ...], classify: Classifier | None = None, fallback: ClaimModel | None = None
) -> dict | None:
    """A claimed limit in `text`, with its evidence and who decided (`decided_by`): the model through
    `classify` where given and it gives a verdict, else the rules, and where they find none the fallback
    model (`fallback`, the committed one by default); that model also overrules a claim of the rules
    that it all but rules out (below its veto in `veto_probability`)."""
    candidates = claim_candidates(text, patterns)
    rules = claimed_limit(text, patterns)
    if not text or (not candidates and rules is None):
        return None
    if classify is not None:
        verdict = classify(text, candidates, rules)
        if verdict is not None:
            claim, quote = verdict
            if not claim:
                return None
            sentence = _quoted(candidates, quote) or (rules["sentence"] if rules else candidates[0])
            return {
                "phrase": quote or sentence,
                "sentence": sentence,
                "pattern": None,
                "decided_by": "model",
                "rules_agree": rules is not None,
            }
    model = fallback or claim_model.load()
    if rules:
        return None if veto_probability(candidates, text, model) < model.veto else {**rules, "decided_by": "rules"}
    return _fallback_claim(text, patterns, model)


def veto_probability(candidates: list[str], text: str, model: ClaimModel) -> float:
    """The fallback model's highest probability over the candidate sentences (the whole text where there
    are none): below its veto, it overrules the rules' claim (the words the rules know, used in another
    sense). scripts/train-claim-model.py chooses the veto against it."""
    return max(map(model.probability, candidates or [text]))


def _fallback_claim(text: str, patterns: tuple[str, ...], model: ClaimModel) -> dict | None:
    """The fallback model's claim: its likeliest candidate sentence (fallback_candidates), where its
    probability reaches the model's threshold."""
    sentences = fallback_candidates(text, patterns)
    if not sentences:
        return None
    sentence = max(sentences, key=model.probability)
    probability = model.probability(sentence)
    if probability < model.threshold:
        return None
    return {
        "phrase": sentence,
        "sentence": sentence,
        "pattern": None,
        "decided_by": "fallback-model",
        "probability": probability,
    }


_NUMBERS = re.compile(r"0x[0-9a-f]+|\d+(\.\d+)?", re.IGNORECASE)
_PATHS = re.compile(r"(/[\w.+-]+)+")


def failure_signature(kind: str, text: str) -> str:
    """A failure with numbers and paths taken out, so that repeats compare equal."""
    text = _PATHS.sub("<path>", text or "")
    text = _NUMBERS.sub("N", text)
    return f"{kind}: {' '.join(text.split())[:160]}"


@dataclass
class DetectorState:
    plateau_best: float | None = None
    evals_since_best: int = 0
    recent_geomeans: list = field(default_factory=list)
    failure_sig: str | None = None
    failure_streak: int = 0
    dwell_layer: str | None = None
    dwell_steps: int = 0
    dwell_from: int = 0


class DecisionDetector:
    def __init__(self, config: QuestionConfig, classify: Classifier | None = None):
        self.config = config
        self.classify = classify  # the run's own model, where it has one
        self.s = DetectorState()

    def claim(self, text: str | None) -> dict | None:
        return decide_claim(text, self.config.claimed_limit_patterns, self.classify)

    def observe(self, step: StepRecord) -> list[DecisionPoint]:
        """Updates the counters with one step and returns the decision points it reached."""
        cfg, s, found = self.config, self.s, []
        claim = self.claim(step.response.content)
        if claim:
            found.append(DecisionPoint("claimed-limit", claim))
        for rec in step.evals:
            ev = rec.evaluation
            s.recent_geomeans = (s.recent_geomeans + [ev.geomean if ev.correct else None])[-8:]
            if (
                ev.correct
                and ev.geomean is not None
                and (s.plateau_best is None or ev.geomean > s.plateau_best * (1 + cfg.new_best_min_gain))
            ):
                s.plateau_best, s.evals_since_best = ev.geomean, 0
            else:
                s.evals_since_best += 1
            if not ev.correct:
                first = next((r for r in ev.per_scenario if r.get("status") != "ok"), {})
                self._failure(failure_signature(f"eval {ev.status}", ev.error or first.get("reason", "")), found)
        for call, result in step.results:
            if call.name == "shell" and result.is_error:
                last = next((l for l in reversed(result.output.splitlines()) if l.strip()), "")
                self._failure(failure_signature("shell", last), found)
        if s.evals_since_best >= cfg.plateau_evals:
            found.append(
                DecisionPoint(
                    "plateau",
                    {
                        "evals_without_new_best": s.evals_since_best,
                        "best_geomean": s.plateau_best,
                        "recent_geomeans": list(s.recent_geomeans),
                        "min_gain": cfg.new_best_min_gain,
                    },
                )
            )
        if step.dominant_layer:
            if step.dominant_layer == s.dwell_layer:
                s.dwell_steps += 1
            else:
                s.dwell_layer, s.dwell_steps, s.dwell_from = step.dominant_layer, 1, step.step
            if s.dwell_steps >= cfg.layer_dwell_steps:
                found.append(
                    DecisionPoint(
                        "layer-dwell", {"layer": s.dwell_layer, "steps": s.dwell_steps, "from_step": s.dwell_from}
                    )
                )
        return sorted(found, key=lambda d: PRIORITY.index(d.trigger))

    def _failure(self, sig: str, found: list[DecisionPoint]) -> None:
        s = self.s
        s.failure_streak = s.failure_streak + 1 if sig == s.failure_sig else 1
        s.failure_sig = sig
        if s.failure_streak >= self.config.repeated_failure and not any(d.trigger == "repeated-failure" for d in found):
            found.append(DecisionPoint("repeated-failure", {"signature": sig, "count": s.failure_streak}))

    def answered(self, trigger: str) -> None:
        """A question was asked for `trigger`: start its count again."""
        s = self.s
        if trigger == "plateau":
            s.evals_since_best = 0
        elif trigger == "repeated-failure":
            s.failure_streak = 0
        elif trigger == "layer-dwell":
            s.dwell_steps = 0

    @property
    def current_layer(self) -> str | None:
        return self.s.dwell_layer

    def state(self) -> dict:
        return asdict(self.s)

    def load_state(self, state: dict) -> None:
        self.s = DetectorState(**state)
