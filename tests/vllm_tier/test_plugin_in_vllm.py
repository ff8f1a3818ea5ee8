"""The plugin inside vLLM 0.33 (pytest -m vllm): loaded by vLLM's own `load_general_plugins()`, the
automatic path (`maybe_override_with_speculators`, then `SpeculativeConfig`) on the *unmodified*
draft directory serves every fixture, variant and real config as trained, with masks from vLLM's
resolver; with the plugin off, the known differences come back."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import specreg
from test_vllm_configs import CASES, EXPLAINED_BY, build, case_config, resolved, speculative, trained
from weights import write_draft

pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module")
def plugin():
    """vLLM's plugin loader runs specreg's entry point; yields the patched modules."""
    from vllm.plugins import load_general_plugins
    from vllm.transformers_utils.configs.speculators import algos, base

    from specreg.vllm import plugin as vllm_plugin

    load_general_plugins()
    assert getattr(algos.SUPPORTED_SPECULATORS_TYPES["dflash"], "_specreg_plugin", False), "not loaded by vLLM"
    yield algos, base.SpeculatorsConfig
    vllm_plugin.uninstall(algos, base.SpeculatorsConfig)


def auto(tmp_path, src, spec):
    from vllm.transformers_utils.config import maybe_override_with_speculators

    target = build(tmp_path, spec)
    _, _, kwargs = maybe_override_with_speculators(str(src), None, False)
    return resolved(speculative(target, kwargs))


def removed_here(spec) -> str | None:
    """vLLM's own refusal of the draft's algorithm, where the installed release removed it (0.34: P-EAGLE)."""
    from specreg import facts

    if any(f.code == "vllm-removed-algorithm" for f in spec.errors):
        return facts.refusal(spec.vllm_version, spec.algorithm)
    return None


@pytest.mark.parametrize("name", CASES)
def test_with_the_plugin_the_unmodified_draft_is_served_as_trained(tmp_path, plugin, name):
    src = write_draft(tmp_path / "src", case_config(name))
    spec = specreg.load(src)
    if removed_here(spec):  # refused at startup in vLLM's words (0.34's own raise comes first), no weight read
        with pytest.raises(ValueError) as info:
            auto(tmp_path, src, spec)
        assert removed_here(spec) in str(info.value)
        return
    got, want = auto(tmp_path, src, spec), trained(spec)
    got.pop("architecture")
    assert {k: got.get(k) for k in want} == want


@pytest.mark.parametrize("name", CASES)
def test_with_the_plugin_off_vllms_known_differences_come_back(tmp_path, plugin, name):
    from specreg.vllm import plugin as vllm_plugin

    src = write_draft(tmp_path / "src", case_config(name))
    spec = specreg.load(src)
    vllm_plugin.uninstall(*plugin)
    if removed_here(spec):  # vLLM itself refuses it: its words are the ones specreg quotes
        try:
            with pytest.raises(ValueError) as info:
                auto(tmp_path, src, spec)
        finally:
            vllm_plugin.install(*plugin, spec.vllm_version)
        assert removed_here(spec) in str(info.value)
        return
    try:
        got = auto(tmp_path, src, spec)
    finally:
        vllm_plugin.install(*plugin, spec.vllm_version)
    want = trained(spec)
    differs = {k for k in want if got.get(k) != want[k]}
    reported = {field for field, codes in EXPLAINED_BY.items() if codes & {f.code for f in spec.findings}}
    assert differs <= reported
    assert bool(differs) == bool(spec.served_differently), (name, differs)


def test_a_draft_vllm_cannot_serve_as_trained_is_refused_before_weights_load(tmp_path, plugin):
    cfg = case_config("dflash")
    cfg["sample_from_anchor"] = True
    cfg["speculators_config"]["proposal_methods"][0]["speculative_tokens"] = 16
    src = write_draft(tmp_path / "src", cfg)
    from vllm.transformers_utils.config import maybe_override_with_speculators

    with pytest.raises(ValueError, match="cannot be served as it was trained") as info:
        maybe_override_with_speculators(str(src), None, False)
    assert "No vLLM release serves this layout" in str(info.value)


def test_a_model_without_speculators_config_is_untouched(tmp_path, plugin):
    from vllm.transformers_utils.config import maybe_override_with_speculators

    spec = specreg.load(write_draft(tmp_path / "src", case_config("dflash")))
    build(tmp_path, spec)  # writes tmp_path/target/config.json, a plain model
    assert maybe_override_with_speculators(str(tmp_path / "target"), None, False) == (
        str(tmp_path / "target"),
        None,
        None,
    )


def test_the_switch_leaves_vllms_mapping_in_a_fresh_vllm_process(tmp_path):  # noqa: ARG001
    code = (
        "from vllm.plugins import load_general_plugins; load_general_plugins();"
        "from vllm.transformers_utils.configs.speculators import algos;"
        "print(getattr(algos.SUPPORTED_SPECULATORS_TYPES['dflash'], '_specreg_plugin', False))"
    )
    off = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "SPECREG_VLLM_PLUGIN": "0"},
    )
    assert off.stdout.strip().splitlines()[-1] == "False", off.stderr[-2000:]
    assert (off.stdout + off.stderr).count("specreg plugin off") == 1
    on = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        env={k: v for k, v in os.environ.items() if k != "SPECREG_VLLM_PLUGIN"},
    )
    assert on.stdout.strip().splitlines()[-1] == "True", on.stderr[-2000:]


CPU = {"VLLM_TARGET_DEVICE": "cpu"}  # vLLM's CUDA build infers no device on this machine otherwise


def test_vllm_serve_help_still_works_with_the_plugin_installed():
    out = subprocess.run(
        [sys.executable, "-m", "vllm.entrypoints.cli.main", "serve", "--help"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **CPU},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.startswith("usage: vllm serve")
    off = subprocess.run(
        [sys.executable, "-m", "vllm.entrypoints.cli.main", "serve", "--help"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **CPU, "SPECREG_VLLM_PLUGIN": "0"},
    )
    assert off.stdout == out.stdout  # the plugin changes nothing in vLLM's CLI


ENGINE = """
import json, sys
from vllm.engine.arg_utils import EngineArgs
from vllm.model_executor.models.qwen3_dflash import _resolve_layer_attention
config = EngineArgs(model=sys.argv[1], max_model_len=4096, skip_tokenizer_init=True).create_engine_config()
sc = config.speculative_config
hf = sc.draft_model_config.hf_config
print("RESULT " + json.dumps({"method": sc.method, "num_speculative_tokens": sc.num_speculative_tokens,
                              "causal": [_resolve_layer_attention(hf, i)[1] for i in range(hf.num_hidden_layers)]}))
"""


def verifier_in_hf_cache(cache, spec) -> None:
    """The verifier's config.json as huggingface_hub lays out a cached snapshot (read offline)."""
    from test_vllm_configs import target_config

    repo = cache / f"models--{spec.verifier.replace('/', '--')}"
    commit = "0" * 40
    (repo / "snapshots" / commit).mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    (repo / "snapshots" / commit / "config.json").write_text(json.dumps(target_config(spec)))


@pytest.mark.parametrize("switch", ["on", "off"])
def test_create_engine_config_plans_the_unmodified_draft_with_specreg(tmp_path, plugin, switch):
    """`EngineArgs(model=DRAFT).create_engine_config()`, as `vllm serve DRAFT` runs it (vLLM loads
    the plugin itself), completes on this CPU machine; the draft's masks come from vLLM's resolver."""
    src = write_draft(tmp_path / "src", case_config("dflash"))
    spec = specreg.load(src)
    verifier_in_hf_cache(tmp_path / "hf", spec)
    env = {
        **os.environ,
        **CPU,
        "HF_HUB_OFFLINE": "1",
        "HF_HUB_CACHE": str(tmp_path / "hf"),
        "SPECREG_VLLM_PLUGIN": "1" if switch == "on" else "0",
    }
    out = subprocess.run([sys.executable, "-c", ENGINE, str(src)], capture_output=True, text=True, timeout=300, env=env)
    needs_triton_cpu(out)
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert line, out.stderr[-3000:]
    got = json.loads(line[len("RESULT ") :])
    want = {
        "method": spec.method,
        "num_speculative_tokens": spec.num_speculative_tokens,
        "causal": [a.causal for a in spec.attention],
    }
    if switch == "on":
        assert got == want
        assert (out.stdout + out.stderr).count("specreg plugin: this dflash draft is planned by specreg") == 1
    else:
        # what vLLM's own mapping serves, computed by vLLM in this process with the plugin taken out
        from specreg.vllm import plugin as vllm_plugin

        vllm_plugin.uninstall(*plugin)
        try:
            own = auto(tmp_path, src, spec)
        finally:
            vllm_plugin.install(*plugin, spec.vllm_version)
        assert got["causal"] == own["causal"] != want["causal"]


V1_CASES = {
    "dflash": case_config("dflash"),
    "dflash-mixed": {
        **case_config("dflash"),
        "transformer_layer_config": {
            **case_config("dflash")["transformer_layer_config"],
            "layer_types": ["sliding_attention"] * 4 + ["full_attention"],
            "sliding_window": 2048,
            "use_sliding_window": True,
        },
    },
    "dflash2": case_config("dflash2"),
    "dflash2-all-full": {
        **case_config("dflash2"),
        "transformer_layer_config": {
            **case_config("dflash2")["transformer_layer_config"],
            "layer_types": ["full_attention"] * 5,
        },
    },
    "dspark": case_config("dspark_generated"),
}


@pytest.mark.parametrize("name", sorted(V1_CASES))
def test_the_v2_runner_rule_is_vllms(tmp_path, name):
    """Without Triton vLLM 0.33 picks its V1 model runner and validates what V1 cannot serve: it refuses
    exactly the drafts specreg says need VLLM_USE_V2_MODEL_RUNNER=1."""
    src = write_draft(tmp_path / "src", V1_CASES[name])
    spec = specreg.load(src)
    verifier_in_hf_cache(tmp_path / "hf", spec)
    env = {**os.environ, **CPU, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "hf")}
    env.pop("VLLM_USE_V2_MODEL_RUNNER", None)
    out = subprocess.run([sys.executable, "-c", ENGINE, str(src)], capture_output=True, text=True, timeout=300, env=env)
    refused = "Model Runner V1 does not support" in out.stderr + out.stdout
    assert refused == spec.needs_v2_model_runner, (out.stdout[-1500:], out.stderr[-1500:])
    assert refused == ("needs-v2-model-runner" in {f.code for f in spec.findings})
    assert spec.serve_env == ({"VLLM_USE_V2_MODEL_RUNNER": "1"} if refused else {})


NATIVE_ENGINE = """
import json, sys
from vllm.engine.arg_utils import EngineArgs
args = EngineArgs(model=sys.argv[1], max_model_len=4096, skip_tokenizer_init=True,
                  speculative_config=json.loads(sys.argv[2]))
try:
    args.create_engine_config()
except Exception as exc:  # later checks of this CPU machine may refuse the engine; the log came first
    print("ENGINE", type(exc).__name__)
"""


@pytest.mark.parametrize(
    ("name", "method", "differs"),
    [
        # ModelOpt's eagle_config ids count a layer's output; vLLM reads them one layer early
        ("modelopt_eagle3_llama4_maverick.json", "eagle3", True),
        # served as trained (for method dspark vLLM itself loads DSparkDraftModel as Qwen3DSparkModel): no line
        ("deepspec_dspark_qwen3_8b.json", "dspark", False),
        ("zlab_dflash_nested_schema.json", "dflash", False),
    ],
)
def test_a_native_draft_vllm_serves_differently_gets_one_line_saying_what_to_run(tmp_path, name, method, differs):
    import shutil

    from test_vllm_configs import DATA as data

    draft = tmp_path / "draft"
    draft.mkdir()
    shutil.copy(data / "native" / name, draft / "config.json")
    spec = specreg.load(draft, verifier="Qwen/Qwen3-8B")
    build(tmp_path, spec)  # a plain local verifier config in tmp_path/target
    env = {**os.environ, **CPU, "HF_HUB_OFFLINE": "1"}
    sc = json.dumps({"model": str(draft), "method": method, "num_speculative_tokens": spec.num_speculative_tokens})
    out = subprocess.run(
        [sys.executable, "-c", NATIVE_ENGINE, str(tmp_path / "target"), sc],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    said = (out.stdout + out.stderr).count(f"does not serve the native draft {draft} as it was trained")
    assert said == (1 if differs else 0), (out.stdout[-2000:], out.stderr[-2000:])
    if differs:
        assert f"Run `specreg serve {draft}`" in out.stdout + out.stderr


ROUTES = """
import json, sys
from vllm.engine.arg_utils import EngineArgs
from vllm.model_executor.models.qwen3_dflash import _resolve_layer_attention
from vllm.utils.argparse_utils import FlexibleArgumentParser
parser = EngineArgs.add_cli_args(FlexibleArgumentParser())
args = parser.parse_args(json.loads(sys.argv[1]))   # the flags `vllm serve` gets after its positional model
config = EngineArgs.from_cli_args(args).create_engine_config()
sc = config.speculative_config
hf = sc.draft_model_config.hf_config
print("RESULT " + json.dumps({"method": sc.method, "num_speculative_tokens": sc.num_speculative_tokens,
                              "draft": sc.draft_model_config.model,
                              "causal": [_resolve_layer_attention(hf, i)[1] for i in range(hf.num_hidden_layers)]}))
"""


def routes(draft, target, k: int | None) -> dict[str, list[str]]:
    """The three ways a user hands vLLM the draft (`vllm serve X FLAGS` is `--model X FLAGS` to the
    parser); naming the verifier, with the draft length `k` or without it."""
    length = {} if k is None else {"num_speculative_tokens": k}
    return {
        "vllm serve DRAFT": ["--model", str(draft)],
        "--speculative-config": [
            "--model",
            str(target),
            "--speculative-config",
            json.dumps({"model": str(draft), **length}),
        ],
        "--spec-model": ["--model", str(target), "--spec-model", str(draft)]
        + ([] if k is None else ["--spec-tokens", str(k)]),
    }


def run_routes(tmp_path, argv: list[str], plugin_on: bool) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        **CPU,
        "HF_HUB_OFFLINE": "1",
        "HF_HUB_CACHE": str(tmp_path / "hf"),
        "SPECREG_VLLM_PLUGIN": "1" if plugin_on else "0",
    }
    return subprocess.run(
        [sys.executable, "-c", ROUTES, json.dumps(argv + ["--max-model-len", "4096", "--skip-tokenizer-init"])],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


#: vLLM 0.34 on an x86 CPU builds no VllmConfig without triton-cpu, which PyPI does not have
#: (vllm/platforms/cpu.py, CpuPlatform.check_and_update_config): what needs one cannot run here
NO_TRITON_CPU = "vLLM on x86 CPUs requires Triton (triton-cpu)."


def needs_triton_cpu(out: subprocess.CompletedProcess) -> None:
    if NO_TRITON_CPU in out.stderr:
        pytest.skip(f"this vLLM builds no VllmConfig on this CPU: {NO_TRITON_CPU!r} (triton-cpu is not on PyPI)")


def routed(out: subprocess.CompletedProcess) -> dict:
    needs_triton_cpu(out)
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert line, out.stderr[-3000:]
    return json.loads(line[len("RESULT ") :])


@pytest.fixture
def draft_and_target(tmp_path):
    """A speculators DFlash in a directory whose name says nothing of its method (vLLM guesses
    methods from paths), a verifier config beside it, and the verifier in an offline HF cache."""
    src = write_draft(tmp_path / "src", case_config("dflash"))
    spec = specreg.load(src)
    build(tmp_path, spec)  # the verifier's config in tmp_path/target, for the routes that name it
    verifier_in_hf_cache(tmp_path / "hf", spec)  # and cached, for the route that reads it from the draft
    return src, tmp_path / "target", spec


@pytest.mark.parametrize("route", ["vllm serve DRAFT", "--speculative-config", "--spec-model"])
@pytest.mark.parametrize("switch", ["on", "off"])
def test_the_plugin_plans_the_draft_whichever_way_vllm_is_given_it(tmp_path, plugin, draft_and_target, route, switch):
    """With the verifier named (`--speculative-config '{"model": DRAFT, ...}'`, `--spec-model DRAFT`)
    vLLM reads the draft's config through the same speculators loader as for `vllm serve DRAFT`, but
    takes its method from the path: the plugin plans the draft on every route (method and masks from
    vLLM's resolver), and with the plugin off vLLM's own choices come back (causal layers; for a
    named draft whose path says nothing, an independent "draft_model")."""
    src, target, spec = draft_and_target
    got = routed(run_routes(tmp_path, routes(src, target, spec.num_speculative_tokens)[route], switch == "on"))
    assert got.pop("draft") == str(src)
    want = {
        "method": spec.method,
        "num_speculative_tokens": spec.num_speculative_tokens,
        "causal": [a.causal for a in spec.attention],
    }
    if switch == "on":
        assert got == want
    else:
        assert got["method"] == ("dflash" if route == "vllm serve DRAFT" else "draft_model")
        assert got["causal"] != want["causal"] and all(got["causal"])


@pytest.mark.parametrize("route", ["--speculative-config", "--spec-model"])
def test_a_named_draft_without_a_length_gets_the_trained_one(tmp_path, plugin, draft_and_target, route):
    """vLLM 0.33 fills num_speculative_tokens from the draft's speculators_config only when the draft
    is the served model; named beside the verifier without a length it refuses to start
    (`SpeculativeConfig.__post_init__`). With the plugin the trained length and method are filled in,
    once in vLLM's log."""
    src, target, spec = draft_and_target
    argv = routes(src, target, None)[route]
    off = run_routes(tmp_path, argv, False)
    needs_triton_cpu(off)
    assert off.returncode != 0 and "`num_speculative_tokens` was not provided" in off.stderr, off.stderr[-2000:]
    on = run_routes(tmp_path, argv, True)
    got = routed(on)
    assert (got["method"], got["num_speculative_tokens"]) == (spec.method, spec.num_speculative_tokens)
    said = f"specreg plugin: the draft {src} is a speculators dflash draft; serving it with its trained"
    assert (on.stdout + on.stderr).count(said) == 1


def test_a_method_the_user_gives_is_kept_and_a_different_one_is_logged(tmp_path, plugin, draft_and_target):
    src, target, spec = draft_and_target
    argv = ["--model", str(target), "--spec-model", str(src), "--spec-method", "draft_model", "--spec-tokens", "3"]
    out = run_routes(tmp_path, argv, True)
    if "speculative_config requested method='draft_model', but the draft model" in out.stderr:
        # 0.34 refuses a method the draft's class contradicts (speculator_config.py
        # _resolve_checkpoint_config_class): the user's method reached vLLM unchanged, and vLLM refused it
        assert out.returncode != 0
        return
    said = f"specreg: the draft {src} was trained as 'dflash'; vLLM is told to serve it as 'draft_model'"
    assert said in out.stdout + out.stderr
    assert routed(out)["method"] == "draft_model"


@pytest.mark.parametrize("route", ["plugin", "vllm alone", "materialized"])
def test_a_top_level_quantization_config_reaches_vllms_draft_model_config(tmp_path, plugin, route):
    """vLLM's get_config puts the file's top-level quantization_config on the draft's config, with or
    without the plugin; the directory specreg materializes holds specreg's draft_config, which carries it."""
    from vllm.transformers_utils.config import maybe_override_with_speculators

    from specreg.vllm import plugin as vllm_plugin

    cfg = case_config("dflash")
    cfg["quantization_config"] = {
        "quant_method": "compressed-tensors",
        "format": "pack-quantized",
        "ignore": ["lm_head"],
        "config_groups": {
            "group_0": {
                "targets": ["Linear"],
                "weights": {"num_bits": 4, "type": "int", "symmetric": True, "strategy": "group", "group_size": 32},
            }
        },
    }
    src = write_draft(tmp_path / "src", cfg)
    spec = specreg.load(src)
    target = build(tmp_path, spec)
    if route == "materialized":
        out = spec.materialize(tmp_path / "draft", weights="none")
        sc = speculative(target, out.llm_kwargs(verifier=str(tmp_path / "target"))["speculative_config"])
    else:
        if route == "vllm alone":
            vllm_plugin.uninstall(*plugin)
        try:
            _, _, kwargs = maybe_override_with_speculators(str(src), None, False)
            sc = speculative(target, kwargs)
        finally:
            if route == "vllm alone":
                vllm_plugin.install(*plugin, spec.vllm_version)
    assert sc.draft_model_config.quantization == "compressed-tensors"


def test_an_independent_draft_model_is_neither_read_nor_warned_about(tmp_path):
    """A named non-speculators draft (here the verifier's own config as an independent draft_model):
    the plugin returns before reading it, so vLLM's log has no specreg warning (issue 35)."""
    spec = specreg.load(write_draft(tmp_path / "src", case_config("dflash")))
    build(tmp_path, spec)  # a plain local model config in tmp_path/target
    env = {**os.environ, **CPU, "HF_HUB_OFFLINE": "1"}
    sc = json.dumps({"model": str(tmp_path / "target"), "method": "draft_model", "num_speculative_tokens": 2})
    out = subprocess.run(
        [sys.executable, "-c", NATIVE_ENGINE, str(tmp_path / "target"), sc],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    warned = [line for line in (out.stdout + out.stderr).splitlines() if "specreg" in line and "WARNING" in line]
    assert warned == [], (out.stdout[-2000:], out.stderr[-2000:])
