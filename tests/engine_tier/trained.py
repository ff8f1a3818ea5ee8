"""Drafts trained by speculators' own trainer (tests/data/trained, made by tests/trainer_tier), served
on vLLM's engine and judged against the acceptance their trainer measured (trainer.json).

The band. A served run of D drafts of k tokens gives per-position counts a_1..a_k (a_i: drafts whose
first i tokens were accepted). Each draft's accepted count X lies in [0, k], so its variance is at
most k^2 / 4 (Popoviciu), and the served AL = 1 + mean(X) has a standard error of at most
k / (2 sqrt(D)) whatever the draft. A served AL is "the trainer's" when it lies within
Z = 3 such errors of the trainer's AL: half-width 3 k / (2 sqrt(D)), from the number of drafts
alone (no typed tolerance; a run of ~800 drafts at k = 3 gives +-0.16).

Sameness. Greedy decoding of the same prompts on the same CPU engine is deterministic: two runs that
serve a draft with the same configuration give the same counters (drafts and per-position counts),
and a served difference that changes any proposal changes them. So "vLLM serves it as specreg does"
is tested exactly, by the counters, and "as its trainer measured" statistically, by the band.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

from test_served_as_trained import VLLM, materialize  # noqa: F401 - `specreg materialize --json`, as a user runs it
from trainer_tier import data as trainer_data

TRAINED = Path(__file__).resolve().parents[1] / "data" / "trained"
Z = 3.0
#: prompts per served run: ~12 drafts each at AL ~3.8 and 48 tokens, so ~800 drafts: a band of about +-0.16
PROMPTS = 64


def drafts() -> list[str]:
    return sorted(p.parent.name for p in TRAINED.glob("*/trainer.json"))


def record(name: str) -> dict:
    return json.loads((TRAINED / name / "trainer.json").read_text())


def prompts(name: str) -> tuple[list[list[int]], int]:
    """The harness trainer.json names: data.py's prompts at its seed, its greedy length."""
    h = record(name)["harness"]
    return trainer_data.prompts(PROMPTS, h["seed"]), h["max_tokens"]


def stage(root: Path, name: str, folder: str | None = None) -> Path:
    """The unmodified draft (in root/folder, root/name by default) beside a copy of the verifier: its
    config names the verifier "verifier", which vLLM resolves in the engine's working directory (root)."""
    if not (root / "verifier").exists():
        shutil.copytree(TRAINED / "verifier", root / "verifier")
    dest = root / (folder or name)
    if not dest.exists():
        shutil.copytree(TRAINED / name, dest)
    return dest


def served_al(result: dict) -> float:
    assert "error" not in result, f"{result['name']}: {result['error']} (log: {result['log']})"
    return 1 + result["num_accepted_tokens"] / result["num_drafts"]


def half_width(result: dict, k: int) -> float:
    return Z * k / (2 * math.sqrt(result["num_drafts"]))


def within(result: dict, name: str) -> tuple[bool, str]:
    """Whether a served run is within the band around the trainer's AL, and the figures that say so."""
    trainer = record(name)
    al, k = served_al(result), trainer["num_speculative_tokens"]
    h = half_width(result, k)
    rates = [round(a / result["num_drafts"], 3) for a in result["per_position"]]
    says = (
        f"{result['name']}: served AL {al:.3f} over {result['num_drafts']} drafts (per position {rates}); "
        f"trainer {trainer['acceptance_length']:.3f} +- {h:.3f}"
    )
    return abs(al - trainer["acceptance_length"]) <= h, says


def counters(result: dict) -> tuple[int, list[int]]:
    assert "error" not in result, f"{result['name']}: {result['error']} (log: {result['log']})"
    return result["num_drafts"], result["per_position"]
