"""A comparison from a protocol file: the protocol fixes everything the comparison holds equal; the
command line may fill what it leaves open (the model, the endpoint, the price, the context window),
never change what it fixes."""

from __future__ import annotations

from pathlib import Path

from .arms import Arms, settle_arms
from .compare import CompareRequest
from .protocol import Protocol, ProtocolError
from .sandbox_policy import runs_sandbox

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


def protocol_request(
    proto: Protocol,
    given: dict,
    *,
    model_name: str | None,
    base_url: str | None,
    price: tuple[float, float] | None,
    context_tokens: int | None,
    out_dir: Path,
    final_bench: bool | None,
    allow_unsandboxed: bool,
) -> CompareRequest:
    """The comparison `proto` fixes. `given`: the command line's options by name (any of
    FIXED_BY_PROTOCOL given is a ProtocolError); a bad arm is an ArmError."""
    fixed = [k for k in FIXED_BY_PROTOCOL if given.get(k) not in (None, (), False)]
    if fixed:
        raise ProtocolError(
            f"the protocol {proto.path} fixes {', '.join('--' + k.replace('_', '-') for k in fixed)}; edit a "
            "copy of it instead"
        )
    model = _model(proto, model_name, base_url, price)
    window = _window(proto, context_tokens)
    given_arms = proto.arms()
    arms = Arms(
        list(given_arms),
        {label: a["agent"] for label, a in given_arms.items()},
        {label: a["options"] for label, a in given_arms.items() if a["options"]},
    )
    control = proto.control()
    settle_arms(arms, control["aa_arm"], proto.question_options())
    fb = proto.final_bench()
    if final_bench is not None:
        fb["enabled"] = final_bench
    return CompareRequest(
        arms=arms.labels,
        task=proto.data["task"]["name"],
        model=model,
        seeds=proto.seeds(),
        limits=proto.limits(),
        task_options=proto.task_options(),
        arm_options=arms.options,
        tools={"sandbox": runs_sandbox(proto.data.get("sandbox"), allow_unsandboxed)},
        out_dir=str(out_dir),
        allow_unsandboxed=allow_unsandboxed,
        agents=arms.agents,
        context={"window_tokens": window} if window else {},
        final_bench=fb,
        protocol={"name": proto.name, "path": proto.path, "sha256": proto.sha256},
        control=control,
    )


def _model(proto: Protocol, name: str | None, base_url: str | None, price: tuple[float, float] | None) -> dict:
    """The protocol's model, with the name and endpoint it leaves open filled in, and the price."""
    model = proto.model()
    for key, value in (("name", name), ("base_url", base_url)):
        if value is not None:
            if model.get(key) not in (None, value):
                raise ProtocolError(
                    f"the protocol {proto.path} fixes the model's {key} ({model[key]}); edit a copy of it instead"
                )
            model[key] = value
    if price:
        model.update(price_input_per_mtok=price[0], price_output_per_mtok=price[1])
    return model


def _window(proto: Protocol, context_tokens: int | None) -> int | None:
    window = proto.data.get("context_tokens")
    if context_tokens is not None:
        if window not in (None, context_tokens):
            raise ProtocolError(f"the protocol {proto.path} fixes the context window ({window} tokens)")
        window = context_tokens
    return window
