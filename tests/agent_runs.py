"""Helpers for tests that drive complete agent runs on the CPU task through the scripted server."""

from __future__ import annotations

from pathlib import Path

from kernelseek_suite.agents import RunConfig, new_run
from kernelseek_suite.contracts.traces import read_trace, validate_trace

SECRET = "sk-test-0123456789-do-not-log"

# the starting kernel with the P.V loop turned inside out: contiguous rows of v
FASTER_KERNEL = r"""
#include <math.h>
#include <stdlib.h>
void ks_attn_fwd_cpu(const float *q, const float *k, const float *v, float *o,
                     int n, int d, int causal, float scale)
{
    float *p = malloc(sizeof(float) * (size_t)n);
    for (int i = 0; i < n; i++) {
        int last = causal ? i : n - 1;
        float mx = -INFINITY;
        for (int j = 0; j <= last; j++) {
            float s = 0.0f;
            for (int c = 0; c < d; c++) s += q[i * d + c] * k[j * d + c];
            p[j] = s * scale;
            if (p[j] > mx) mx = p[j];
        }
        float sum = 0.0f;
        for (int j = 0; j <= last; j++) { p[j] = expf(p[j] - mx); sum += p[j]; }
        float *out = o + (size_t)i * d;
        for (int c = 0; c < d; c++) out[c] = 0.0f;
        for (int j = 0; j <= last; j++)
            for (int c = 0; c < d; c++) out[c] += p[j] * v[j * d + c];
        for (int c = 0; c < d; c++) out[c] /= sum;
    }
    free(p);
}
"""

WRONG_KERNEL = """void ks_attn_fwd_cpu(const float *q, const float *k, const float *v, float *o,
                     int n, int d, int causal, float scale) { for (int i = 0; i < n * d; i++) o[i] = 0.0f; }
"""


def config_for(server, arm: str = "kernelseek", goal: float = 1000.0, **limits) -> RunConfig:
    cfg = RunConfig(arm=arm, task="cpu-attn", task_options={"goal": goal, "budget_ms": 2.0}, seed=7)
    cfg.model.name = "scripted-model"
    cfg.model.base_url = server.url
    cfg.model.timeout_s = 0.5
    cfg.model.max_attempts = 6
    cfg.model.backoff_initial_s = 0.01
    cfg.model.backoff_max_s = 0.05
    cfg.limits.max_steps = 12
    for k, v in limits.items():
        setattr(cfg.limits, k, v)
    return cfg


def run(cfg: RunConfig, tmp_path: Path, api_key: str | None = SECRET):
    trace = Path(tmp_path) / "run" / "trace.jsonl"
    agent = new_run(cfg, trace, api_key)
    result = agent.run()
    v = validate_trace(trace)
    assert v.ok, v.errors
    return result, read_trace(trace).events, agent


def of_type(events: list[dict], type_: str) -> list[dict]:
    return [e for e in events if e["type"] == type_]


def user_texts(body: dict) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "user"]
