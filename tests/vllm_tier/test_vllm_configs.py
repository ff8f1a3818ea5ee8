"""Materialized drafts through vLLM's own config objects (pytest -m vllm; needs `pip install vllm`).

For every servable fixture: materialize it (config only), build vLLM's `ModelConfig` for a tiny
local verifier config and `SpeculativeConfig` from `Materialized.llm_kwargs()`, and check that
vLLM resolves what specreg's plan says: method, draft length, parallel drafting, draft
architecture, aux/target layer ids and, for the DFlash family, every layer's causality (with
vLLM's own per-layer resolver). Then the unmodified file goes through vLLM's automatic path
(`maybe_override_with_speculators`, as `vllm serve DRAFT` does); every way it differs from the
trained plan must be one specreg reported as a finding. No engine, no GPU, no network.
"""

from __future__ import annotations

import json
import re
import os
import subprocess
import sys

import pytest

import specreg
from conftest import DATA, fixture_config
from weights import write_draft

pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module", autouse=True)
def vllm_installed():
    """The tier was asked for: say what it needs rather than skip quietly."""
    try:
        import vllm  # noqa: F401
    except ImportError:
        pytest.fail(
            "the vllm tier needs vLLM installed beside specreg: pip install vllm (CPU is enough); see the README",
            pytrace=False,
        )


SERVABLE = [
    "dflash",
    "dflash2",
    "dspark_generated",
    "eagle3_converted",
    "eagle3_generated",
    "eagle3_v040_generated",
    "peagle",
]
#: variants that make vLLM's automatic path differ from training in other ways
VARIANTS = {
    # sliding layers causal, full layers bidirectional: vLLM 0.26+ makes every layer causal
    "dflash2-causal-sliding": ("dflash2", {"sliding_window_non_causal": False}),
    # speculators' default false, vLLM's true
    "eagle3-no-norm-flag": ("eagle3_generated", {"norm_before_residual": None}),
    # speculators' default true for DSpark, vLLM's false
    "dspark-no-anchor-flag": ("dspark_generated", {"sample_from_anchor": None}),
    # causal sliding DSpark layers (GLM-5.3, Kimi-K3 style): vLLM's layer_types fallback serves them as trained
    "dspark-causal-sliding": (
        "dspark_generated",
        {
            "sliding_window_non_causal": False,
            "transformer_layer_config": {
                "layer_types": ["sliding_attention"] * 3,
                "sliding_window": 512,
                "use_sliding_window": True,
            },
        },
    ),
    # non-causal sliding DSpark layers: the mapping writes no flag, so vLLM would serve them causal
    "dspark-non-causal-sliding": (
        "dspark_generated",
        {
            "sliding_window_non_causal": True,
            "transformer_layer_config": {
                "layer_types": ["sliding_attention"] * 3,
                "sliding_window": 512,
                "use_sliding_window": True,
            },
        },
    ),
}
CASES = SERVABLE + sorted(VARIANTS)


def case_config(case: str) -> dict:
    """A fixture, or a variant of one (a value of None drops the key)."""
    if case not in VARIANTS:
        return fixture_config(case)
    name, changes = VARIANTS[case]
    config = fixture_config(name)
    for key, value in changes.items():
        if value is None:
            del config[key]
        elif isinstance(value, dict):
            config[key].update(value)
        else:
            config[key] = value
    return config


#: which finding explains a difference between vLLM's automatic path and the trained plan
EXPLAINED_BY = {
    "causal": {"served-causal-mismatch"},
    "num_speculative_tokens": {"served-length-mismatch", "proposal-method-not-first"},
    "dspark_bonus_anchor": {"served-length-mismatch"},
    "norm_before_residual": {"served-default-mismatch"},
    "aux_layer_ids": {"served-default-mismatch", "aux-layers-missing"},
    "architecture": {"served-default-mismatch", "top-level-model-type"},
}


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


def target_config(spec) -> dict:
    """A verifier config shaped like the draft's verifier (config only: no weights, no tokenizer)."""
    draft = spec.draft_config
    ids = list(draft.get("eagle_aux_hidden_state_layer_ids") or [2, 16, 29])
    layers = max(36, max(ids) + 2)
    qwen = "qwen" in (spec.verifier or "").lower()
    return {
        "architectures": ["Qwen3ForCausalLM" if qwen else "LlamaForCausalLM"],
        "model_type": "qwen3" if qwen else "llama",
        "hidden_size": draft.get("target_hidden_size") or draft["hidden_size"],
        "intermediate_size": 1024,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "num_hidden_layers": layers,
        "vocab_size": draft.get("vocab_size") or 151936,
        "max_position_embeddings": 8192,
        "rms_norm_eps": 1e-6,
        "torch_dtype": "bfloat16",
    }


def build(tmp_path, spec):
    from vllm.config import ModelConfig

    target_dir = tmp_path / "target"
    target_dir.mkdir(exist_ok=True)
    (target_dir / "config.json").write_text(json.dumps(target_config(spec)))
    target = ModelConfig(model=str(target_dir), tokenizer=str(target_dir), skip_tokenizer_init=True, max_model_len=4096)
    return target


def speculative(target, kwargs: dict):
    from vllm.config import ParallelConfig, SpeculativeConfig

    return SpeculativeConfig(target_model_config=target, target_parallel_config=ParallelConfig(), **kwargs)


def drafts_in_parallel(sc) -> bool:
    """Whether vLLM drafts every slot at once: the speculative config's flag, or (from 0.34, where the
    flag is deprecated and has no effect) the method's speculator config class, which says it for
    DFlash and DSpark (vllm/v1/worker/gpu/spec_decode/dflash/config.py: parallel_drafting = True)."""
    try:
        from vllm.v1.worker.gpu.spec_decode.speculator_config import get_speculator_config_class
    except ImportError:  # before 0.34: the flag alone decides
        return bool(getattr(sc, "parallel_drafting", False))
    return bool(getattr(get_speculator_config_class(sc), "parallel_drafting", False))


def resolved(sc) -> dict:
    """What vLLM will serve, read back from its config objects."""
    hf = sc.draft_model_config.hf_config
    out = {
        "method": sc.method,
        "num_speculative_tokens": sc.num_speculative_tokens,
        "parallel_drafting": drafts_in_parallel(sc),
        "architecture": sc.draft_model_config.architectures[0],
    }
    aux = getattr(hf, "eagle_aux_hidden_state_layer_ids", None)
    out["aux_layer_ids"] = list(aux) if aux is not None else None
    if sc.method == "eagle3":
        out["norm_before_residual"] = getattr(hf, "norm_before_residual", None)
    if sc.method in ("dflash", "dspark"):
        out["causal"] = served_masks(sc)
    if sc.method == "dflash":
        out["target_layer_ids"] = list((getattr(hf, "dflash_config", None) or {}).get("target_layer_ids") or [])
    if sc.method == "dspark":
        out["dspark_bonus_anchor"] = getattr(hf, "dspark_bonus_anchor", None)
    return out


def served_masks(sc) -> list[bool]:
    """Every draft layer's mask as vLLM builds it: the layer's own resolver (DSpark and DFlash2 layers
    are DFlash decoder layers, checked below), and no speculator class that overrides it."""
    import inspect

    from vllm.model_executor.models.qwen3_dflash import DFlashQwen3DecoderLayer, _resolve_layer_attention
    from vllm.model_executor.models.registry import ModelRegistry

    hf = sc.draft_model_config.hf_config
    arch = sc.draft_model_config.architectures[0]
    import importlib

    name = ModelRegistry.models[arch].module_name
    module = importlib.import_module(name if name.startswith("vllm.") else f"vllm.model_executor.models.{name}")
    layer_classes = [
        c
        for _, c in inspect.getmembers(module, inspect.isclass)
        if issubclass(c, __import__("torch").nn.Module)
        and c.__module__ == module.__name__
        and "DecoderLayer" in c.__name__
    ]
    assert all(issubclass(c, DFlashQwen3DecoderLayer) for c in layer_classes), (arch, layer_classes)
    if sc.method == "dspark":
        from vllm.v1.worker.gpu.spec_decode.dspark.speculator import DSparkSpeculator

        assert "dflash_causal" not in inspect.getsource(DSparkSpeculator.__init__)  # 0.25 forced it False
    import types
    from unittest import mock

    from vllm.model_executor.models import qwen3_dflash

    # Mixed sliding/full layers are resolved only on the V2 model runner (vLLM raises otherwise,
    # and specreg says so with needs-v2-model-runner): resolve as that runner does.
    v2 = types.SimpleNamespace(use_v2_model_runner=True)
    with mock.patch.object(qwen3_dflash, "get_current_vllm_config", lambda: v2):
        return [_resolve_layer_attention(hf, i)[1] for i in range(hf.num_hidden_layers)]


def trained(spec) -> dict:
    """What specreg's plan says the draft was trained with."""
    d = spec.draft_config
    out = {
        "method": spec.method,
        "num_speculative_tokens": spec.num_speculative_tokens,
        "parallel_drafting": spec.method in ("dflash", "dspark")
        or bool(spec.speculative_config.get("parallel_drafting")),
        "aux_layer_ids": list(d["eagle_aux_hidden_state_layer_ids"])
        if "eagle_aux_hidden_state_layer_ids" in d
        else None,
    }
    if spec.method == "eagle3":
        out["norm_before_residual"] = d.get("norm_before_residual")
    if spec.method in ("dflash", "dspark"):
        out["causal"] = [a.causal for a in spec.attention]
    if spec.method == "dflash":
        out["target_layer_ids"] = list(d["dflash_config"]["target_layer_ids"])
    if spec.method == "dspark":
        out["dspark_bonus_anchor"] = d.get("dspark_bonus_anchor")
    return out


@pytest.mark.parametrize("name", CASES)
def test_the_materialized_draft_resolves_as_trained(tmp_path, name):
    src = write_draft(tmp_path / "src", case_config(name))
    spec = specreg.load(src)  # targets the installed vLLM
    import vllm

    assert spec.vllm_version == vllm.__version__.split("+")[0]
    if any(f.code == "vllm-removed-algorithm" for f in spec.errors):  # 0.34: P-EAGLE, refused, nothing written
        with pytest.raises(specreg.SpecregError, match="vllm-removed-algorithm"):
            spec.materialize(tmp_path / "draft", weights="none")
        assert not (tmp_path / "draft").exists()
        return
    out = spec.materialize(tmp_path / "draft", weights="none")
    target = build(tmp_path, spec)
    sc = speculative(target, out.llm_kwargs(verifier=str(tmp_path / "target"))["speculative_config"])
    got, want = resolved(sc), trained(spec)
    got_arch = got.pop("architecture")
    assert {k: got.get(k) for k in want} == want
    # the class vLLM picked exists in its registry and is the class its own mapping picks
    from vllm.model_executor.models import ModelRegistry

    assert got_arch in ModelRegistry.get_supported_archs()
    auto = auto_path(tmp_path, target, src)
    if "architecture" not in explained(spec):
        assert model_class(got_arch) == model_class(auto["architecture"])


def model_class(arch: str) -> tuple[str, str]:
    """The (module, class) vLLM's model registry loads for an architecture name."""
    from vllm.model_executor.models import ModelRegistry

    entry = ModelRegistry.models[arch]
    return entry.module_name, entry.class_name


def auto_path(tmp_path, target, src) -> dict | None:
    """vLLM's reading of the unmodified speculators file (as `vllm serve DRAFT` would)."""
    from vllm.transformers_utils.config import maybe_override_with_speculators

    _, _, sc_kwargs = maybe_override_with_speculators(str(src), None, False)
    return resolved(speculative(target, sc_kwargs))


def explained(spec) -> set[str]:
    codes = {f.code for f in spec.findings}
    return {field for field, by in EXPLAINED_BY.items() if by & codes}


@pytest.mark.parametrize("name", CASES)
def test_every_difference_on_vllms_automatic_path_is_a_reported_finding(tmp_path, name):
    src = write_draft(tmp_path / "src", case_config(name))
    spec = specreg.load(src)
    target = build(tmp_path, spec)
    if any(f.code == "vllm-removed-algorithm" for f in spec.errors):  # 0.34 refuses it: specreg says so
        from specreg import facts

        with pytest.raises(ValueError, match=re.escape(facts.refusal(spec.vllm_version, spec.algorithm))):
            auto_path(tmp_path, target, src)
        return
    auto = auto_path(tmp_path, target, src)
    want = trained(spec)
    differs = sorted(k for k in want if auto.get(k) != want[k])
    unexplained = [k for k in differs if k not in explained(spec)]
    assert not unexplained, (
        f"vLLM's automatic path differs from the trained plan in {unexplained} without a finding: "
        f"vLLM {[auto.get(k) for k in unexplained]} vs trained {[want[k] for k in unexplained]}; "
        f"findings {[f.code for f in spec.findings]}"
    )


#: refused layouts (Domino, SpecForge P-EAGLE) are covered by the real-config test below
NATIVE = sorted(
    p.name
    for p in (DATA / "native").glob("*.json")
    if p.name != "deepspec_dspark_qwen3_8b_causal.json" and not p.name.endswith(("domino.json", "peagle.json"))
)


@pytest.mark.parametrize("name", NATIVE)
def test_a_materialized_native_draft_resolves_as_trained(tmp_path, name):
    """Native formats (z-lab, DeepSpec, EAGLE-3 releases) through the same vLLM config objects."""
    import shutil

    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(DATA / "native" / name, src / "config.json")
    verifier = "meta-llama/Llama-3.1-8B-Instruct" if "llama" in name else "Qwen/Qwen3-8B"
    spec = specreg.load(src, verifier=verifier)
    out = spec.materialize(tmp_path / "draft", weights="none")
    target = build(tmp_path, spec)
    sc = speculative(target, out.llm_kwargs(verifier=str(tmp_path / "target"))["speculative_config"])
    got, want = resolved(sc), trained(spec)
    assert {k: got.get(k) for k in want} == want


SHAPES = {
    # (fixture, layer-config changes): specreg's verdict must be vLLM's
    "llama-hidden-not-multiple": ("eagle3_generated", {"hidden_size": 4100}),
    "llama-no-heads": ("eagle3_generated", {"num_attention_heads": 0}),
    "qwen3-hidden-not-multiple-with-head-dim": ("dflash", {"hidden_size": 4100}),
}


@pytest.mark.parametrize("case", sorted(SHAPES))
def test_a_shape_specreg_refuses_is_one_vllms_config_objects_refuse(tmp_path, case):
    name, changes = SHAPES[case]
    config = fixture_config(name)
    config["transformer_layer_config"].update(changes)
    spec = specreg.normalize(config)
    refused = "invalid-draft-shape" in {f.code for f in spec.findings}
    draft = tmp_path / "draft"
    draft.mkdir()
    (draft / "config.json").write_text(json.dumps(spec.draft_config_dict()))
    target = build(tmp_path, specreg.normalize(fixture_config(name)))  # a verifier vLLM accepts
    kwargs = {**spec.speculative_config_dict(), "model": str(draft)}
    try:
        speculative(target, kwargs)
        vllm_refuses = False
    except Exception:  # noqa: BLE001 - whatever vLLM raises, the point is that it refuses
        vllm_refuses = True
    assert refused == vllm_refuses


REAL = sorted(p.name for p in (DATA / "real" / "specforge").glob("*.json"))


@pytest.mark.parametrize("name", REAL)
def test_a_real_config_is_served_as_trained_or_refused_with_its_reason(tmp_path, name):
    """Published SpecForge configs, materialized: vLLM 0.33 serves each exactly as planned, with the
    class its registry gives the native file's own architecture name."""
    import shutil

    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(DATA / "real" / "specforge" / name, src / "config.json")
    native_arch = json.loads((src / "config.json").read_text())["architectures"][0]
    try:
        spec = specreg.load(src, verifier="Qwen/Qwen3-8B")
    except specreg.ConfigError as exc:
        assert exc.path == "$.architectures" and native_arch in str(exc)
        return
    target = build(tmp_path, spec)
    if not spec.servable:
        # refused for a shape vLLM cannot build: vLLM refuses the unmodified file too
        assert {f.code for f in spec.errors} == {"invalid-draft-shape"}, [f.message for f in spec.errors]
        with pytest.raises(Exception, match="not a multiple"):
            speculative(target, {"model": str(src), "method": spec.method, "num_speculative_tokens": 3})
        return
    out = spec.materialize(tmp_path / "draft", weights="none")
    sc = speculative(target, out.llm_kwargs(verifier=str(tmp_path / "target"))["speculative_config"])
    got, want = resolved(sc), trained(spec)
    arch = got.pop("architecture")
    assert {k: got.get(k) for k in want} == want
    if native_arch != "DSparkDraftModel":  # vLLM 0.33 maps that name to its DeepSeek-V4 DSpark, not Qwen3's
        assert model_class(arch) == model_class(native_arch)


def test_serve_output_for_a_catalog_draft_with_vllm_flags_parses_in_vllms_own_cli(hub, tmp_path):
    """`specreg serve RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3 -- --tensor-parallel-size 2` (the
    repo on the loopback Hub) prints a line that vLLM 0.33's `vllm serve` parser accepts, with the flags."""
    import os
    import shlex
    import subprocess
    import sys

    repo = "RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3"
    hub.add(repo, {"config.json": json.dumps(fixture_config("eagle3_generated")).encode()})
    online = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "specreg",
            "serve",
            repo,
            "--dir",
            str(tmp_path / "d"),
            "--config-only",
            "--",
            "--tensor-parallel-size",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=online,
    )
    assert out.returncode == 0, out.stderr
    argv = shlex.split(out.stdout.strip())
    assert argv[:2] == ["vllm", "serve"]
    parse = (
        "import json, sys\n"
        "from vllm.entrypoints.cli.serve import ServeSubcommand\n"
        "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
        "parser = FlexibleArgumentParser()\n"
        "sub = parser.add_subparsers(dest='subparser')\n"
        "ServeSubcommand().subparser_init(sub)\n"
        "args = parser.parse_args(sys.argv[1:])\n"
        "print(json.dumps({'model': args.model_tag, 'tp': args.tensor_parallel_size,\n"
        "                  'spec': args.speculative_config}, default=str))\n"
    )
    parsed = subprocess.run(
        [sys.executable, "-c", parse, *argv[1:]],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "VLLM_TARGET_DEVICE": "cpu"},
    )
    assert parsed.returncode == 0, parsed.stderr[-3000:]
    got = json.loads(parsed.stdout.strip().splitlines()[-1])
    assert got["model"] == "meta-llama/Llama-3.1-8B-Instruct" and got["tp"] == 2
    assert "eagle3" in str(got["spec"]) and str(tmp_path / "d") in str(got["spec"])


OTHER_REAL = sorted(
    str(p.relative_to(DATA / "real")) for p in (DATA / "real").glob("*/*.json") if p.parent.name != "specforge"
)


@pytest.mark.parametrize("name", OTHER_REAL)
def test_other_trainers_real_configs_are_served_with_the_planned_class_or_refused(tmp_path, name):
    """The 40 configs of tests/test_native_structure.py's OUTCOMES: what specreg serves, vLLM 0.33's
    own config objects accept from the materialized directory, with the class specreg planned."""
    import shutil

    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(DATA / "real" / name, src / "config.json")
    try:
        spec = specreg.load(src, verifier="Qwen/Qwen3-8B")
    except specreg.ConfigError:
        return  # refused with its reason (the default suite checks the reason)
    if not spec.servable:
        return  # an error finding (trained-key-not-served): nothing is written for vLLM
    served_as_planned(tmp_path, spec, build(tmp_path, spec))


def served_as_planned(tmp_path, spec, target):
    """The materialized draft through vLLM's SpeculativeConfig: what it resolves is what specreg planned
    (the trained values and the class); the SpeculativeConfig."""
    out = spec.materialize(tmp_path / "draft", weights="none")
    sc = speculative(target, out.llm_kwargs(verifier=str(tmp_path / "target"))["speculative_config"])
    got, want = resolved(sc), trained(spec)
    arch = got.pop("architecture")
    assert {k: got.get(k) for k in want} == want
    assert model_class(arch) == model_class(spec.draft_config_dict()["architectures"][0])
    return sc


def _error_codes(spec) -> set[str]:
    return {f.code for f in spec.findings if f.severity == "error"}


@pytest.mark.parametrize(
    "name, model_type, code, vllm_says",
    [
        (
            "torchspec/dspark_draft_config.json",
            "qwen3",
            "unknown-model-type",
            "model type `dspark` but Transformers does not recognize",
        ),
        ("torchspec/qwen3_8b_eagle3_mla.json", "deepseek_v2", "vllm-startup-refusal", "DeepSeekMTPModel"),
    ],
)
def test_a_model_type_specreg_refuses_is_one_vllm_cannot_serve_and_the_fix_is_served(
    tmp_path, name, model_type, code, vllm_says
):
    """The two model_type findings, proved with vLLM 0.33's objects: the file as trained, handed to vLLM
    as it is, fails (transformers does not know the type) or is built as an MTP model
    (SpeculativeConfig.hf_config_override); with the model_type the finding's fix names, specreg plans it
    and vLLM serves the planned class."""
    import shutil

    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(DATA / "real" / name, src / "config.json")
    spec = specreg.load(src, verifier="Qwen/Qwen3-8B")
    assert code in _error_codes(spec)
    target = build(tmp_path, spec)
    method = "dspark" if "dspark" in name else "eagle3"
    try:
        sc = speculative(target, {"model": str(src), "method": method, "num_speculative_tokens": 3})
        said = sc.draft_model_config.architectures[0]
    except Exception as err:  # noqa: BLE001 - vLLM's refusal is what is being shown
        said = str(err)
    assert vllm_says in said

    fixed = tmp_path / "fixed"
    fixed.mkdir()
    (fixed / "config.json").write_text(
        json.dumps({**json.loads((src / "config.json").read_text()), "model_type": model_type})
    )
    spec = specreg.load(fixed, verifier="Qwen/Qwen3-8B")
    assert not _error_codes(spec)
    sc = served_as_planned(tmp_path, spec, target)
    if model_type == "deepseek_v2":
        assert sc.draft_model_config.hf_config.kv_lora_rank == 512


def test_vllms_own_hf_config_override_rewrites_exactly_the_tabled_model_types():
    """vLLM 0.33's SpeculativeConfig.hf_config_override itself (not the conformance tier's copy), on a
    real transformers config per model_type: the table's types lose the draft class, others keep it."""
    from transformers import PretrainedConfig
    from vllm.config import SpeculativeConfig

    from specreg.normalization.capabilities import parse_version
    from specreg.normalization.model_types import MTP_REWRITES, mtp_rewrite

    def after(model_type):
        config = PretrainedConfig(architectures=["Eagle3LlamaForCausalLM"])
        config.model_type = model_type
        try:
            return SpeculativeConfig.hf_config_override(config).architectures[0]
        except Exception:  # noqa: BLE001
            return "refused"

    version = parse_version("0.33")
    for model_type in MTP_REWRITES:
        expected = mtp_rewrite(model_type, version)
        if expected is None:
            continue
        got = after(model_type)
        assert got != "Eagle3LlamaForCausalLM", model_type
        if expected != "refused":
            assert got == expected, model_type
    for model_type in ("llama", "qwen3", "deepseek_v2", "kimi_k2"):
        assert after(model_type) == "Eagle3LlamaForCausalLM", model_type


def test_serve_reads_the_users_flags_with_vllms_own_parser():
    """With vLLM installed, serve's reading of the flags after `--` is vLLM's parser; its option strings
    for the settings serve writes or hints are the table the CPU-only path uses. (In a child process:
    vLLM's argument parser needs a device, here its CPU platform.)"""
    code = (
        "import json\n"
        "from specreg.vllm.flags import OPTIONS, _live_parser, settings\n"
        "p = _live_parser()\n"
        "live = {o: a.dest for a in p._actions for o in a.option_strings if a.dest in set(OPTIONS.values())}\n"
        "print(json.dumps({'same': live == OPTIONS, 'live': live,\n"
        "                  'given': settings(['-tp', '4', '--max_model_len=100', '--port', '8001']),\n"
        "                  'spec': settings(['--spec-model', 'x'])}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "VLLM_TARGET_DEVICE": "cpu"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["same"], got["live"]
    assert got["given"] == [{"tensor_parallel_size": "4", "max_model_len": "100"}, "vLLM's parser"]
    assert set(got["spec"][0]) == {"spec_model"}


def test_a_dflash2_draft_trained_with_nope_layers_gets_the_class_the_facts_say(tmp_path):
    """The installed vLLM's own SpeculativeConfig on the materialized draft: where the facts say it reads
    no_rope_layers (dflash2_nope_layers, from 0.34), its hf_config_override gives the draft the class whose
    listed layers skip RoPE, and specreg reports nothing; where they say it does not, specreg refuses."""
    import vllm

    from specreg import facts

    config = fixture_config("dflash2")
    config["transformer_layer_config"]["no_rope_layers"] = [1, 3]
    src = write_draft(tmp_path / "src", config)
    spec = specreg.load(src)  # targets the installed vLLM
    version = vllm.__version__.split("+")[0]
    if not facts.holds("dflash2_nope_layers", version):
        assert "vllm-unsupported-feature" in {f.code for f in spec.errors}
        with pytest.raises(specreg.SpecregError, match="vllm-unsupported-feature"):
            spec.materialize(tmp_path / "draft", weights="none")
        return
    assert not spec.errors
    out = spec.materialize(tmp_path / "draft", weights="none")
    target = build(tmp_path, spec)
    sc = speculative(target, out.llm_kwargs(verifier=str(tmp_path / "target"))["speculative_config"])
    arch = sc.draft_model_config.architectures[0]
    assert model_class(arch) == ("vllm.model_executor.models.ricursive_dflash2", "RicursiveDFlash2ForCausalLM")
    assert list(sc.draft_model_config.hf_config.no_rope_layers) == [1, 3]
    # vLLM's own automatic path (`vllm serve DRAFT`) on the unmodified file picks the same class
    assert model_class(auto_path(tmp_path, target, src)["architecture"]) == model_class(arch)


def test_the_aux_capture_table_is_vllms_own_supports_eagle3():
    """For the installed vLLM's release, aux_capture.json (read from the wheel's source with ast by the
    conformance tier) names exactly the registered architectures whose class vLLM's own
    `supports_eagle3` accepts, every class this machine can import loaded by vLLM's registry. Those it
    cannot import (a CUDA-only extension, a missing optional package) are named, and must stay few."""
    import logging

    import vllm
    from vllm.model_executor.models.interfaces import supports_eagle3
    from vllm.model_executor.models.registry import ModelRegistry

    from specreg.normalization.capabilities import aux_capture

    release, table = aux_capture(vllm.__version__)
    assert vllm.__version__.startswith(release + "."), (vllm.__version__, release)
    logging.disable(logging.ERROR)  # the registry logs a traceback per class it cannot import
    try:
        loaded = {arch: ModelRegistry._try_load_model_cls(arch) for arch in ModelRegistry.get_supported_archs()}
    finally:
        logging.disable(logging.NOTSET)
    unloadable = sorted(a for a, cls in loaded.items() if cls is None)
    vllms = {a for a, cls in loaded.items() if cls is not None and supports_eagle3(cls)}
    ours = {a for a in table if loaded.get(a) is not None}
    assert ours == vllms, {"table only": sorted(ours - vllms), "vLLM only": sorted(vllms - ours)}
    assert len(unloadable) <= len(loaded) // 20, unloadable
    assert not set(table) - set(loaded), sorted(set(table) - set(loaded))  # no name the registry lacks
