"""What a run's `protections` record (run_start, resume) lacks, each with what gives it back: for the
self-check, which fails on a missing protection unless told to accept it, and for `compare`, which
lists such runs (docs/threat-model.md)."""

from __future__ import annotations

from dataclasses import dataclass

NO_LANDLOCK = (
    "run on Linux 5.13+ with Landlock enabled (`cat /sys/kernel/security/lsm` lists landlock; if not, add it to "
    "the kernel's lsm= boot parameter); in a container, keep the default seccomp profile of Docker 20.10+ or "
    "Podman, which allows the Landlock system calls (an older one needs --security-opt seccomp=unconfined)"
)


# what `compare` refuses without --allow-unsandboxed (the rest it lists in its table)
SANDBOX = ("no protections recorded", "shell not sandboxed", "candidates not sandboxed", "agent command not sandboxed")


@dataclass(frozen=True)
class Missing:
    what: str  # the protection, in words
    remedy: str  # what gives it back: an option to drop, a command to run


def _sandbox_remedy(detail: str | None, option: str = "--sandbox none") -> str:
    if detail == "disabled by configuration":
        return f"drop {option}"
    return f"{detail}: {NO_LANDLOCK}" if detail else NO_LANDLOCK


def missing(prot: dict | None) -> list[Missing]:
    """Every protection `prot` lacks (all of them for a trace that recorded none)."""
    if prot is None:
        return [Missing("no protections recorded", "run it again with this version of the suite")]
    out = []
    shell, candidates = prot.get("shell", {}), prot.get("candidates", {})
    evaluator = prot.get("evaluator", {})
    if shell.get("sandbox") != "landlock":
        out.append(Missing("shell not sandboxed", _sandbox_remedy(shell.get("detail"))))
    if candidates.get("sandbox") != "landlock":
        out.append(Missing("candidates not sandboxed", _sandbox_remedy(evaluator.get("sandbox_detail"))))
    if not evaluator.get("sealed"):
        out.append(Missing("evaluator not sealed", "run it with this version of the suite"))
    sec = prot.get("secrets", {})
    if not sec.get("agent_non_dumpable"):
        out.append(
            Missing(
                "agent process dumpable",
                "run on Linux, where prctl(PR_SET_DUMPABLE, 0) is allowed (a security module refused it here)",
            )
        )
    command = prot.get("agent_command")
    if command is not None and command.get("sandbox") != "landlock":
        out.append(
            Missing(
                "agent command not sandboxed",
                _sandbox_remedy(command.get("detail"), "--sandbox none (or --agent-opt sandbox=none)"),
            )
        )
    if sec.get("ancestors_holding_key"):
        out.append(
            Missing(
                "key in the environment of " + ", ".join(sec["ancestors_holding_key"]),
                "start the command with the key in its own environment only, from a shell that does not export "
                "it: `unset OPENAI_API_KEY; OPENAI_API_KEY=... kernelseek-suite ...`",
            )
        )
    return out
