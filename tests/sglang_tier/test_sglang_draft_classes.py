"""The SGLang tier, the draft classes: SGLang 0.5.23's own class for each algorithm is built from the
config.json specreg writes (its __init__ on the CPU) and loads a checkpoint's tensors, named as the
checkpoint names them (tests/tiny.py), through its own load_weights: the fc width is the trained one
and no tensor is dropped. And each refusal shown real: SGLang's readers, given the file a hand repack
would give them, serve something other than the trained plan."""

from __future__ import annotations

import inspect
import json
import sys
import types

import pytest

import specreg
from specreg.normalization.speculator import thaw
from specreg.sglang.export import differences, export
from specreg.sglang.rules import rules

from sglang_tier import readers
from tiny import HIDDEN, draft_config, weights

pytestmark = pytest.mark.sglang

RULES = rules()
MODULES = {
    "LlamaForCausalLMEagle3": "sglang.srt.models.llama_eagle3",
    "DFlashDraftModel": "sglang.srt.models.dflash",
    "DFlash2DraftModel": "sglang.srt.models.dflash",
    "Qwen3DSparkModel": "sglang.srt.models.dspark",
}
#: tensors SGLang derives another way, by its code: t2d is the inverse of d2t, which it keeps as
#: hot_token_id (llama_eagle3.py: load_weights)
DERIVED = {"t2d"}


@pytest.fixture(scope="module")
def runtime(tmp_path_factory):
    """SGLang's process context on the CPU: a resolved ServerArgs published, one-rank gloo groups. Its
    rotary layer imports a CUDA kernel module off CUDA (never called by __init__ or load_weights): an
    empty stand-in is installed for that import only."""
    from sglang.srt.distributed import init_distributed_environment, initialize_model_parallel
    from sglang.srt.runtime_context import publish
    from sglang.srt.server_args import ServerArgs

    kernel = types.ModuleType("vllm._custom_ops")
    kernel.rotary_embedding = None
    sys.modules.setdefault("vllm", types.ModuleType("vllm")).__dict__.setdefault("_custom_ops", kernel)
    sys.modules.setdefault("vllm._custom_ops", kernel)
    server_args = ServerArgs(model_path=str(readers.target_dir(tmp_path_factory.mktemp("t"), 6)), device="cpu")
    server_args.resolve_once()
    publish(server_args, role="scheduler")
    init_distributed_environment(
        world_size=1,
        rank=0,
        local_rank=0,
        backend="gloo",
        distributed_init_method=f"file://{tmp_path_factory.mktemp('dist')}/init",
    )
    initialize_model_parallel(backend="gloo")
    from sglang.srt.runtime_context import get_parallel

    get_parallel().override_permanently(tp_rank=0)  # this process's rank, as a launched scheduler writes it
    return server_args


def _config(algo: str) -> dict:
    cfg = draft_config(algo)
    if algo == "eagle3":
        cfg["norm_before_residual"] = False  # SGLang refuses true: test_norm_before_residual_is_read_nowhere
    return cfg


def _build(plan, tmp_path):
    import importlib

    from sglang.srt.utils.hf_transformers_utils import get_config

    draft = tmp_path / "draft"
    draft.mkdir()
    (draft / "config.json").write_text(json.dumps(plan.config_dict()))
    hf = get_config(str(draft), trust_remote_code=False)
    cls_name = plan.config["architectures"][0]
    return getattr(importlib.import_module(MODULES[cls_name]), cls_name)(hf)


def _param_of(name: str, params: dict) -> str | None:
    """The parameter a checkpoint tensor loads into, by SGLang's stacked-name rule (q/k/v -> qkv_proj,
    gate/up -> gate_up_proj) and its optional "model." prefix."""
    stacked = name
    for part, into in (
        (".q_proj", ".qkv_proj"),
        (".k_proj", ".qkv_proj"),
        (".v_proj", ".qkv_proj"),
        (".gate_proj", ".gate_up_proj"),
        (".up_proj", ".gate_up_proj"),
    ):
        if part in stacked and into not in stacked:
            stacked = stacked.replace(part, into)
            break
    for candidate in (stacked, f"model.{stacked}", stacked.removeprefix("model.")):
        if candidate in params:
            return candidate
    return None


@pytest.mark.parametrize("algo", ["dspark", "dflash", "eagle3"])
def test_the_draft_class_builds_and_loads_every_checkpoint_tensor(algo, runtime, tmp_path):
    import torch

    spec = specreg.normalize(_config(algo), source=f"{algo}.json", verifier="org/verifier")
    checkpoint = weights(algo)
    if algo != "eagle3":  # a DFlash-family checkpoint without a head of its own (one with it is refused)
        checkpoint = {n: s for n, s in checkpoint.items() if not n.startswith("lm_head.")}
    else:  # an Eagle-3 layer attends over [embedding, hidden state]: its q_proj reads 2 x hidden
        checkpoint["layers.0.self_attn.q_proj.weight"] = ((HIDDEN, 2 * HIDDEN), "float16")
    plan = export(spec, tensor_names=list(checkpoint))
    assert plan.servable, [f.message for f in plan.errors]
    model = _build(plan, tmp_path)
    fc = dict(model.named_parameters()).get("fc.weight", dict(model.named_parameters()).get("model.fc.weight"))
    assert fc.shape[1] == HIDDEN * len(plan.trained.capture)  # the fc width: one hidden state per capture layer
    params = dict(model.named_parameters())
    with torch.no_grad():
        for p in params.values():
            p.fill_(float("nan"))
    tensors = {n: torch.ones(shape, dtype=getattr(torch, dtype)) for n, (shape, dtype) in checkpoint.items()}
    model.load_weights(list(tensors.items()))
    dropped = []
    for name in tensors:
        if name in DERIVED:
            continue
        if name == "d2t":
            assert model.hot_token_id is not None
            continue
        target = _param_of(name, params)
        if target is None or not bool((params[target] == 1).any()):
            dropped.append(name)
    from sglang.srt.speculative.ragged_verify import RaggedVerifyMode, read_ragged_verify_mode

    if algo == "dspark" and read_ragged_verify_mode() is RaggedVerifyMode.STATIC:
        # SGLang builds no confidence head when it verifies every drafted token (dspark.py:
        # build_confidence_head); the head only schedules verification, not what is accepted
        assert sorted(n for n in dropped if n.startswith("confidence_head.")) == sorted(
            n for n in tensors if n.startswith("confidence_head.")
        )
        dropped = [n for n in dropped if not n.startswith("confidence_head.")]
    assert dropped == []


def test_a_dflash_head_of_the_drafts_own_is_dropped_without_a_word(runtime, tmp_path):
    """Why specreg refuses a DFlash draft whose checkpoint holds lm_head: SGLang's class has no such
    parameter, and load_weights skips it."""
    import torch

    spec = specreg.normalize(_config("dflash"), source="dflash.json", verifier="org/verifier")
    model = _build(export(spec), tmp_path)
    assert "lm_head.weight" in weights("dflash")
    assert all(not n.startswith("lm_head.") for n, _ in model.named_parameters())
    model.load_weights([("lm_head.weight", torch.ones(weights("dflash")["lm_head.weight"][0]))])  # no error


def test_norm_before_residual_is_read_nowhere_by_the_eagle3_class():
    import sglang.srt.models.llama_eagle3 as eagle3

    assert "norm_before_residual" not in inspect.getsource(eagle3)


def test_dflash_trained_from_the_anchor_is_served_after_it(tmp_path, fx):
    cfg = fx("dflash")
    cfg["sample_from_anchor"] = True
    cfg["speculators_config"]["proposal_methods"][0]["speculative_tokens"] = 16
    spec = specreg.normalize(cfg, source="dflash.json")
    repack = export(specreg.load(specreg_fixture("dflash"))).config_dict()  # the same file, repacked by hand
    repack["dflash_config"]["sample_from_anchor"] = True
    repack["sample_from_anchor"] = True
    draft = tmp_path / "draft"
    draft.mkdir()
    (draft / "config.json").write_text(json.dumps(repack))
    got = readers.read(draft, "dflash", ["--speculative-dflash-block-size", "16"])
    plan = export(spec)
    assert (got.proposals, got.sample_from_anchor) == (15, False)  # SGLang drafts after the anchor
    assert differences(got, plan.trained) != []


def test_per_layer_masks_sglang_cannot_say(tmp_path):
    """Sliding layers non-causal with a causal full layer: no layer_types + is_causal gives it."""
    base = export(specreg.load(specreg_fixture("dflash2"))).config_dict()
    wanted = ((2048, False),) * 4 + ((None, True),)
    seen = set()
    for is_causal in (None, True, False):
        cfg = dict(base)
        cfg.pop("is_causal", None)
        if is_causal is not None:
            cfg["is_causal"] = is_causal
        draft = tmp_path / f"draft-{is_causal}"
        draft.mkdir()
        (draft / "config.json").write_text(json.dumps(cfg))
        seen.add(readers.read(draft, "dflash2", ["--speculative-dflash-block-size", "16"]).attention)
    assert wanted not in seen and len(seen) == 3


def test_an_unmodified_speculators_file_is_refused_by_sglang(tmp_path):
    spec = specreg.load(specreg_fixture("dspark_generated"))
    draft = tmp_path / "draft"
    draft.mkdir()
    (draft / "config.json").write_text(json.dumps(thaw(spec.source_config)))
    assert readers.read(draft, "dspark", ()).refused


def specreg_fixture(name: str):
    from conftest import DATA

    return DATA / "speculators" / f"{name}.json"


def test_sglang_has_no_parallel_xpress_or_mlp_drafting():
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    builtins = set(SpeculativeAlgorithm.__members__)
    assert {"EAGLE3", "DFLASH", "DSPARK"} <= builtins
    assert not {n for n in builtins if any(w in n for w in ("PEAGLE", "PARALLEL", "XPRESS", "MLP"))}
