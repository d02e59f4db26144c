"""The agents: a minimal coding agent on any OpenAI-compatible chat-completions endpoint, the
KernelSeek arm (the agent + a harness that enforces the goal + questions at decision points), the
question bank, and traces of everything that happens.

Layout: protocols.py (the seams, `Driver` among them), lifecycle.py (the run's lifecycle both
drivers share: opening, checkpoints, the end), records.py (a step's and a run's records), config.py
(settings and prompts), agent.py (the built-in agent's loop),
model.py (the client, retries), compaction.py (the context window), tools.py (tools and their
registry), workspace.py (where tools act), procgroup.py (a child in its own process group, known to
the reaper), registry.py (the arms' and tasks' registries), seal.py + sandbox.py + policy.py + childenv.py (what
protects the evaluator, the repository and the key; docs/threat-model.md), tasks/ (fa-fwd-sm90,
cpu-attn), arms/ (general, kernelseek, toolrich, agent-cmd), external.py (an agent command driven
through sessions), decisions.py + questions.py + bank.py (the KernelSeek questions),
profiler_tools.py + retrieval.py + lessons.py + population.py (the tool-rich arm's equipment),
trace.py (writing traces; reading them is contracts/traces.py), runner.py (a run put together, or resumed),
selfcheck.py (a task's tools driven without a model). The head-to-head (compare, protocol, plan,
statistics, report, trace analysis) is the `headtohead` package, which uses this one (never the other
way round). The commands are in suite/cli/.
The `openai` client and `tenacity` come with the `agents` extra; nothing here imports them until a
model is made.
"""

from ..lazy import lazy_exports

_EXPORTS: dict[str, tuple[str, ...]] = {
    "agent": ("Agent", "RunResult", "StepRecord"),
    "bank": ("Bank", "BankError", "Question", "load_bank"),
    "config": ("Limits", "ModelConfig", "QuestionConfig", "RunConfig", "ToolsConfig"),
    "exceptions": ("HarnessTampered", "LimitExceeded", "ModelError", "Submitted", "Terminate"),
    "protocols": ("Environment", "Model", "Supervisor"),
    "runner": ("RunSetupError", "new_run", "resume_run"),
    "tasks": ("Evaluation", "Goal", "Task", "make_task", "task_names"),
    "tools": ("Tool", "ToolRegistry", "ToolResult", "base_tools"),
    "trace": ("TraceWriter",),
    "workspace": ("Workspace",),
}
# loaded on first use, so that the package imports fast
__all__, __getattr__ = lazy_exports(__name__, _EXPORTS)
