"""The arms of a comparison: their labels and agents (`kernelseek,info=kernelseek,codex=agent-cmd`),
each arm's options, the A/A copy of one arm, the question settings given to the arms that take them,
and the check of all of it before anything runs. The same rules hold for a protocol's arms and for
the command line's."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..agents.arms import ArmOptionError, arm_names, arm_options, check_options
from ..agents.arms.kernelseek import question_settings
from .report import AA_SUFFIX


class ArmError(ValueError):
    """An arm, an arm's option or a question setting that cannot be used; `option` names the
    command-line option it came from, where one did."""

    def __init__(self, message: str, option: str | None = None):
        super().__init__(message)
        self.option = option


@dataclass
class Arms:
    labels: list[str]  # in order
    agents: dict[str, str]  # label -> agent
    options: dict[str, dict] = field(default_factory=dict)  # label -> its options

    @property
    def classifying(self) -> list[str]:
        """The arms that classify claimed limits with the model (a kernelseek arm unless told not to)."""
        return [
            label
            for label in self.labels
            if self.agents[label] == "kernelseek" and self.options.get(label, {}).get("classify_claims", True)
        ]


def parse_arms(spec: str) -> Arms:
    """`kernelseek,info=kernelseek,codex=agent-cmd` -> the labels in order and each label's agent."""
    labels, agents = [], {}
    for item in (a.strip() for a in spec.split(",")):
        if not item:
            continue
        label, _, agent = item.partition("=")
        label, agent = label.strip(), (agent.strip() or label.strip())
        labels.append(label)
        agents[label] = agent
    return Arms(labels, agents)


def settle_arms(arms: Arms, aa_arm: str | None, questions: dict) -> Arms:
    """The arms as they will run: the A/A copy of `aa_arm` added, the question settings given to every
    arm that takes them, and everything checked (an ArmError says what is wrong)."""
    _add_aa_copy(arms, aa_arm)
    arms.options = _with_questions(arms, questions)
    _check(arms)
    return arms


def _add_aa_copy(arms: Arms, aa_arm: str | None) -> None:
    """The A/A copy of `aa_arm` (the same agent and options, labelled `<arm>-aa`) added in place."""
    if not aa_arm:
        return
    if aa_arm not in arms.labels:
        raise ArmError(f"the A/A arm {aa_arm!r} is not one of the arms ({', '.join(arms.labels)})")
    copy = aa_arm + AA_SUFFIX
    if copy in arms.labels:
        raise ArmError(f"{copy!r} is the A/A copy of {aa_arm!r}: no arm may have that label")
    arms.labels.append(copy)
    arms.agents[copy] = arms.agents[aa_arm]
    if aa_arm in arms.options:
        arms.options[copy] = dict(arms.options[aa_arm])


def _with_questions(arms: Arms, questions: dict) -> dict[str, dict]:
    """The arms' options with the question settings given to every arm that takes them (an arm's own
    options win); none taking them is an error."""
    if not questions:
        return arms.options

    def takes(label: str) -> bool:
        try:
            return set(questions) <= set(arm_options(arms.agents[label]))
        except KeyError:  # an unknown agent: _check says so
            return False

    takers = [label for label in arms.labels if takes(label)]
    if not takers:
        raise ArmError(f"no arm takes the question settings ({', '.join(questions)})")
    return {**arms.options, **{label: {**questions, **arms.options.get(label, {})} for label in takers}}


def _check(arms: Arms) -> None:
    """Every arm and option checked before anything runs."""
    labels, agents = arms.labels, arms.agents
    known = arm_names()
    bad = [agents[label] for label in labels if agents[label] not in known]
    if bad or len(set(labels)) != len(labels) or not labels:
        raise ArmError(f"arms are {', '.join(known)} (or LABEL=AGENT), each label once", "--agents")
    for label in arms.options:
        if label not in agents:
            raise ArmError(f"{label!r} is not one of the arms ({', '.join(labels)})", "--agent-opt")
    try:
        for label in labels:
            check_options(agents[label], arms.options.get(label, {}))
            question_settings(arms.options.get(label, {}))
    except ArmOptionError as e:
        raise ArmError(f"{label}: {e}", "--agent-opt") from e
