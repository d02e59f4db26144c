"""A head-to-head protocol: one YAML file that fixes everything a comparison holds equal (model and
sampling, endpoint, seeds, budgets, the task and its goal, the arms and their options, the question
settings, the final full-grid bench) and the measured times its plan is made from, with what the
setup being reproduced discloses and what was chosen here. Validated against
`schemas/protocol-v1.schema.json`; `protocols/paper.yaml` and `protocols/smoke.yaml` are shipped."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from .. import config as suite_config
from ..contracts.yamlfile import load_yaml_document

PROTOCOL_VERSION = 1
PROTOCOLS_DIR = suite_config.REPO_ROOT / "protocols"
# protocol question settings -> the arm option they set (arms that take it)
QUESTION_KEYS = {
    "categories": "categories",
    "plateau": "plateau_evals",
    "repeats": "repeated_failure",
    "spacing": "min_steps_between",
}


# the A/A control and the statistics' minimum when a protocol (or the command line) does not say
CONTROL_DEFAULTS = {"aa_arm": None, "aa_repeats": 5, "rebench": 3, "min_runs": 3}


class ProtocolError(ValueError):
    """The protocol file is missing, not YAML, or breaks the schema."""


@dataclass(frozen=True)
class Protocol:
    path: str
    sha256: str
    data: dict

    @property
    def name(self) -> str:
        return self.data["name"]

    def seeds(self) -> list[int]:
        s = self.data["seeds"]
        return list(range(1, s + 1)) if isinstance(s, int) else list(s)

    def arms(self) -> dict[str, dict]:
        """label -> {agent, options}."""
        return {
            label: {"agent": a["agent"], "options": dict(a.get("options") or {})}
            for label, a in self.data["arms"].items()
        }

    def limits(self) -> dict:
        b = self.data.get("budget") or {}
        out = {k: b[k] for k in ("max_steps", "max_evals", "max_tokens", "max_cost") if b.get(k) is not None}
        if b.get("max_wall_min") is not None:
            out["max_wall_s"] = b["max_wall_min"] * 60
        return out

    def model(self) -> dict:
        m = dict(self.data.get("model") or {})
        price = m.pop("price", None)
        out = {k: v for k, v in m.items()}
        if price:
            out.update(price_input_per_mtok=price[0], price_output_per_mtok=price[1])
            if len(price) > 2:
                out["price_cached_input_per_mtok"] = price[2]
        return out

    def task_options(self) -> dict:
        t = self.data["task"]
        opts = dict(t.get("options") or {})
        if t.get("goal") is not None:
            opts["goal"] = t["goal"]
        if t.get("kernel"):
            k = Path(t["kernel"])
            opts["kernel"] = str(k if k.is_absolute() else suite_config.REPO_ROOT / k)
        return opts

    def question_options(self) -> dict:
        """The protocol's question settings as arm options."""
        q = self.data.get("questions") or {}
        return {QUESTION_KEYS[k]: v for k, v in q.items()}

    def final_bench(self) -> dict:
        fb = self.data.get("final_bench") or {}
        return {"enabled": fb.get("enabled", True), "timeout_s": fb.get("timeout_s", 3600)}

    def control(self) -> dict:
        """The A/A control and the statistics' minimum, the defaults filled in."""
        return {**CONTROL_DEFAULTS, **(self.data.get("control") or {})}


def protocol_schema() -> dict:
    return json.loads(resources.files(__package__).joinpath("schemas/protocol-v1.schema.json").read_text())


def _where(data: dict, path) -> str:
    """'arms/kernelseek/agent' for an error path."""
    return "/".join(map(str, path)) or "top level"


def load_protocol(path: Path | str) -> Protocol:
    path = Path(path)
    if (
        not path.exists()
        and not path.is_absolute()
        and (PROTOCOLS_DIR / path.name).exists()
        and path.parent.name == "protocols"
    ):
        path = PROTOCOLS_DIR / path.name  # `protocols/x.yaml` from outside the repository
    raw, data = load_yaml_document(
        path, protocol_schema(), ProtocolError, what="the protocol", not_a_mapping="expected a mapping", where=_where
    )
    return Protocol(str(path), hashlib.sha256(raw).hexdigest(), data)
