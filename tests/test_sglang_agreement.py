"""The SGLang export compares the draft with its verifier as SGLang's classes read the two
(specreg.sglang.agreement, the rules' `rope` entry): RoPE and head size, where SGLang's reading
differs from vLLM's (the dict it takes, the top-level-only rotated share, the neox style, the
DFlash classes' rope_dim); and the vocabulary as SGLang shares the verifier's embedding (the rules'
`vocab`)."""

from __future__ import annotations

import json

import pytest

import tiny
from specreg.sglang.agreement import rope_view
from specreg.sglang.plan import sglang_plan
from specreg.sglang.rules import rules

RULES = rules()
ROPE = RULES["rope"]
VERSION = RULES["sglang"]


def _files(tmp_path, algo, draft_layer=None, verifier=None):
    cfg = tiny.draft_config(algo)
    cfg["transformer_layer_config"].update(draft_layer or {})
    (tmp_path / "draft").mkdir()
    (tmp_path / "draft" / "config.json").write_text(json.dumps(cfg))
    (tmp_path / "verifier").mkdir()
    body = {**tiny.verifier_config(algo), "num_attention_heads": 4, "head_dim": 2, **(verifier or {})}
    (tmp_path / "verifier" / "config.json").write_text(json.dumps(body))
    return tmp_path / "draft" / "config.json", tmp_path / "verifier"


def _plan(tmp_path, algo, draft_layer=None, verifier=None):
    draft, ver = _files(tmp_path, algo, draft_layer, verifier)
    return sglang_plan(str(draft), verifier=str(ver), check_weights=False)


def _codes(plan):
    return [f.code for f in plan.findings if f.code.startswith("verifier-")]


def test_a_rope_theta_the_verifier_does_not_share_is_an_sglang_finding_with_both_values(tmp_path):
    plan = _plan(tmp_path, "dflash", verifier={"rope_theta": 10000.0})  # the draft's: 1000000
    assert _codes(plan) == ["verifier-rope-mismatch"]
    (found,) = [f for f in plan.findings if f.code == "verifier-rope-mismatch"]
    assert "rope_theta: draft 1000000, verifier 10000.0" in found.message
    assert f"SGLang {VERSION} rotates the draft's positions" in found.message
    assert "every position after the first" in found.message
    assert plan.servable  # a warning: the draft is still served as written


def test_a_share_written_only_inside_rope_parameters_is_not_read_by_sglang(tmp_path):
    """vLLM reads partial_rotary_factor from rope_parameters (agreement.rope_view) and sees no difference;
    SGLang's DFlashAttention reads it from the top level only (the rules' `top_level`), so the draft
    rotates its whole head against half of the verifier's."""
    layer = {
        "head_dim": 8,
        "rope_parameters": {"rope_theta": 1000000, "rope_type": "default", "partial_rotary_factor": 0.5},
    }
    verifier = {"head_dim": 8, "rope_theta": 1000000, "partial_rotary_factor": 0.5}
    plan = _plan(tmp_path, "dflash", layer, verifier)
    assert [f.code for f in plan.speculator.checks.found if f.code.startswith("verifier-rope")] == []  # vLLM's
    assert _codes(plan) == ["verifier-rope-mismatch"]
    message = next(f.message for f in plan.findings if f.code == "verifier-rope-mismatch")
    assert "rotated dimensions: draft 8, verifier 4" in message


def test_the_dflash_classes_rope_dim_is_the_rotated_width(tmp_path):
    layer = {"head_dim": 8, "rope_parameters": {"rope_theta": 1000000, "rope_type": "default", "rope_dim": 4}}
    plan = _plan(tmp_path, "dflash", layer, {"head_dim": 8, "rope_theta": 1000000})
    message = next(f.message for f in plan.findings if f.code == "verifier-rope-mismatch")
    assert "rotated dimensions: draft 4, verifier 8" in message


def test_a_llama3_draft_whose_original_length_sglang_takes_from_max_positions_differs(tmp_path):
    """vLLM compares only what both dicts state; with transformers' default the draft's llama3 scaling
    starts at its own max_position_embeddings, the verifier's at the one its dict names."""
    scaling = {
        "rope_theta": 500000,
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
    }
    layer = {"rope_parameters": scaling, "max_position_embeddings": 2048}
    verifier = {"rope_parameters": {**scaling, "original_max_position_embeddings": 8192}}
    plan = _plan(tmp_path, "dflash", layer, verifier)
    assert [f.code for f in plan.speculator.checks.found if f.code.startswith("verifier-rope")] == []  # vLLM's
    message = next(f.message for f in plan.findings if f.code == "verifier-rope-mismatch")
    assert "original_max_position_embeddings: draft 2048, verifier 8192" in message


def test_the_neox_style_both_state_is_compared(tmp_path):
    """get_rope's is_neox_style (its cache key) comes from the config in SGLang's classes."""
    plan = _plan(tmp_path, "dflash", {"rope_is_neox_style": False}, {"rope_is_neox_style": True})
    message = next(f.message for f in plan.findings if f.code == "verifier-rope-mismatch")
    assert "is_neox_style: draft False, verifier True" in message


def test_a_head_size_difference_names_the_dimensions_sglang_rotates(tmp_path):
    plan = _plan(tmp_path, "dspark", verifier={"head_dim": 4, "rope_theta": 10000.0})
    assert _codes(plan) == ["verifier-head-dim-mismatch"]
    message = next(f.message for f in plan.findings if f.code == "verifier-head-dim-mismatch")
    assert "head size is 2" in message and "rotates 2 dimensions of each draft head against 4" in message


def test_no_verifier_check_no_comparison_and_agreeing_configs_give_none(tmp_path):
    plan = _plan(tmp_path, "dflash", verifier={"rope_theta": 1000000})
    assert _codes(plan) == []
    (tmp_path / "alone").mkdir()
    draft, _ = _files(tmp_path / "alone", "dflash", verifier={"rope_theta": 10000.0})
    assert _codes(sglang_plan(str(draft), check_weights=False)) == []  # no verifier given: none read


@pytest.mark.parametrize(
    "config, reader, view",
    [
        # transformers folds rope_scaling (before rope_parameters), its `type` and the top-level rope_theta
        (
            {"rope_scaling": {"type": "yarn", "factor": 4.0}, "rope_parameters": {"rope_type": "x"}, "rope_theta": 5},
            "EAGLE3",
            {"rope_type": "yarn", "factor": 4.0, "rope_theta": 5},
        ),
        # vLLM's legacy names are read by neither transformers' Llama/Qwen3 classes nor SGLang's
        ({"rotary_emb_base": 500000, "rotary_pct": 0.5}, "DFLASH", {}),
        # rope_dim is the DFlash classes' width (replacing the share); the EAGLE-3 class does not read it
        ({"rope_parameters": {"rope_dim": 4}, "partial_rotary_factor": 0.5}, "DFLASH", {"rope_dim": 4}),
        (
            {"rope_parameters": {"rope_dim": 4}, "partial_rotary_factor": 0.5},
            "EAGLE3",
            {"partial_rotary_factor": 0.5},
        ),
        # transformers gives llama3/yarn/longrope their original length; llama.py writes the top-level one over it
        (
            {"rope_parameters": {"rope_type": "llama3", "factor": 8.0}, "max_position_embeddings": 4096},
            "DFLASH",
            {"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 4096},
        ),
        (
            {
                "rope_scaling": {"rope_type": "yarn"},
                "max_position_embeddings": 4096,
                "original_max_position_embeddings": 2048,
            },
            "EAGLE3",
            {"rope_type": "yarn", "original_max_position_embeddings": 2048},
        ),
        (
            {
                "rope_scaling": {"rope_type": "yarn"},
                "max_position_embeddings": 4096,
                "original_max_position_embeddings": 2048,
            },
            "DFLASH",
            {"rope_type": "yarn", "original_max_position_embeddings": 4096},
        ),
        ({"is_neox_style": False}, "DFLASH", {"is_neox_style": False}),
        ({"is_neox_style": False}, "EAGLE3", {}),
    ],
)
def test_the_view_is_what_sglangs_classes_take(config, reader, view):
    assert rope_view(config, ROPE["readers"][reader], ROPE) == view


def test_serve_for_sglang_prints_the_rope_finding_once_in_sglangs_terms(tmp_path):
    """The vLLM pre-flight's finding (in vLLM's terms) is left out of what `--engine sglang` prints: the
    plan has its own, as SGLang reads the two configs."""
    from conftest import run_in_process as run

    draft, verifier = _files(tmp_path, "dflash", verifier={"rope_theta": 10000.0})
    out = tmp_path / "out"
    r = run("materialize", str(draft), str(out), "--engine", "sglang", "--verifier", str(verifier), "--config-only")
    assert r.returncode == 0, r.stderr
    (line,) = [x for x in r.stderr.splitlines() if "verifier-rope-mismatch" in x]
    assert f"SGLang {VERSION} rotates" in line


def test_a_draft_sglang_refuses_keeps_the_vllm_checks_rope_finding(tmp_path):
    """No config is written for SGLang, so nothing is compared in its terms: the pre-flight's finding stays."""
    from conftest import run_in_process as run

    draft, verifier = _files(tmp_path, "peagle", verifier={"rope_theta": 10.0})
    r = run("materialize", str(draft), str(tmp_path / "out"), "--engine", "sglang", "--verifier", str(verifier))
    assert r.returncode == 1 and "sglang-unservable" in r.stderr, r.stderr
    (line,) = [x for x in r.stderr.splitlines() if "verifier-rope-mismatch" in x]
    assert "vLLM rotates" in line


def _vocab(plan):
    (found,) = [f for f in plan.findings if f.code == "verifier-vocab-mismatch"]
    return found.message


def test_an_eagle3_draft_of_another_vocabulary_has_its_embedding_replaced_by_the_verifiers(tmp_path):
    """SGLang's EAGLE-3 worker calls set_embed with the target's embedding (the rules' `vocab`), where
    vLLM keeps a draft's own loaded table: the draft's 64-row embedding is not the one it is served with."""
    plan = _plan(tmp_path, "eagle3", verifier={"vocab_size": 128})
    assert "verifier-vocab-mismatch" in _codes(plan)
    message = _vocab(plan)
    assert "the draft's vocab_size is 64" in message and "'s 128" in message
    assert f"SGLang {VERSION}'s LlamaForCausalLMEagle3 replaces the draft's 64-row embedding" in message
    assert "llama.py:910-918" in message


def test_an_eagle3_draft_whose_target_hidden_size_differs_keeps_its_own_embedding(tmp_path):
    """set_embed returns without replacing the table when target_hidden_size is not the draft's
    hidden_size: the draft embeds with its own 64 rows, as in vLLM."""
    message = _vocab(_plan_with(tmp_path, "eagle3", {"target_hidden_size": 16}, {"vocab_size": 128}))
    assert "keeps the draft's own embedding (target_hidden_size 16 is not its hidden_size)" in message
    assert "token ids at or past 64 fall outside it" in message


def _plan_with(root, algo, top, verifier):
    cfg = tiny.draft_config(algo)
    cfg.update(top)
    (root / "draft").mkdir(parents=True)
    (root / "draft" / "config.json").write_text(json.dumps(cfg))
    (root / "verifier").mkdir()
    body = {**tiny.verifier_config(algo), "num_attention_heads": 4, "head_dim": 2, **verifier}
    (root / "verifier" / "config.json").write_text(json.dumps(body))
    return sglang_plan(str(root / "draft" / "config.json"), verifier=str(root / "verifier"), check_weights=False)


@pytest.mark.parametrize("algo, cls", [("dflash", "DFlashDraftModel"), ("dspark", "Qwen3DSparkModel")])
def test_a_dflash_family_draft_of_another_vocabulary_is_served_with_the_verifiers_tables(tmp_path, algo, cls):
    plan = _plan(tmp_path, algo, verifier={"vocab_size": 128})
    message = _vocab(plan)
    assert f"SGLang {VERSION}'s {cls} embeds and scores the draft's block with" in message
    assert "128-token embedding and lm_head: the draft was trained against a 64-token verifier" in message


def test_the_same_vocabulary_gives_no_vocab_finding(tmp_path):
    assert "verifier-vocab-mismatch" not in _codes(_plan(tmp_path, "eagle3"))


def test_serve_for_sglang_prints_the_vocab_finding_once_in_sglangs_terms(tmp_path):
    from conftest import run_in_process as run

    draft, verifier = _files(tmp_path, "dflash", verifier={"vocab_size": 128})
    out = tmp_path / "out"
    r = run("materialize", str(draft), str(out), "--engine", "sglang", "--verifier", str(verifier), "--config-only")
    assert r.returncode == 0, r.stderr
    (line,) = [x for x in r.stderr.splitlines() if "verifier-vocab-mismatch" in x]
    assert "embeds and scores the draft's block" in line


def test_an_eagle3_draft_without_a_head_of_its_own_has_its_embedding_replaced_whatever_its_hidden_size(tmp_path):
    """No draft_vocab_size: SGLang's class loads the head from the target, and set_embed_and_head replaces
    the embedding too, without set_embed's hidden-size exception (the rules' `vocab`)."""
    cfg = tiny.draft_config("eagle3")
    del cfg["draft_vocab_size"]
    (tmp_path / "draft").mkdir()
    (tmp_path / "draft" / "config.json").write_text(json.dumps({**cfg, "target_hidden_size": 16}))
    (tmp_path / "verifier").mkdir()
    body = {**tiny.verifier_config("eagle3"), "num_attention_heads": 4, "head_dim": 2, "vocab_size": 128}
    (tmp_path / "verifier" / "config.json").write_text(json.dumps(body))
    plan = sglang_plan(
        str(tmp_path / "draft" / "config.json"), verifier=str(tmp_path / "verifier"), check_weights=False
    )
    assert "replaces the draft's 64-row embedding" in _vocab(plan)
