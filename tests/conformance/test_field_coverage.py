"""Field coverage from vLLM's own code, per wheel (issue 23): every ``dflash_config`` key the DFlash
family's model classes read (found with ``ast`` in each wheel) is either written by specreg itself
(`keys.CONSUMED`) or carried unchanged (`keys.CARRIED`, and the algorithm module's extras), and a
native file holding it gets it in ``draft_config.dflash_config`` with its value. A wheel that starts
reading a key specreg drops fails here. Also each wheel's M-RoPE startup refusal, as specreg models it."""

from __future__ import annotations

import ast
import copy
import json
import os
import zipfile
from pathlib import Path

import pytest

import specreg
from specreg import facts
from specreg.normalization import algorithms
from specreg.sources.native import keys
from tests.conformance.vllm_mapping import wheel, wheel_file


def _required(z: zipfile.ZipFile, path: str) -> str:
    """A module every known wheel has, read through any `sys.modules` shim (KeyError where it is gone)."""
    text = wheel_file(z, path)
    if text is None:
        raise KeyError(f"{path} is not in the wheel")
    return text


pytestmark = pytest.mark.conformance

VERSIONS = [facts.wheel(r) for r in facts.tested_by("field_coverage")]
MODELS = "vllm/model_executor/models/"
#: the classes each algorithm is served with (DFlash2Qwen3Model subclasses the DFlash model)
FILES = {"dflash": ["qwen3_dflash.py"], "dflash2": ["qwen3_dflash2.py", "qwen3_dflash.py"]}
DATA = Path(__file__).parent.parent / "data"


def _is_dflash_config(node: ast.AST) -> bool:
    if isinstance(node, ast.Attribute) and node.attr == "dflash_config":
        return True
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr":
        return len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and node.args[1].value == "dflash_config"
    if isinstance(node, ast.BoolOp):  # getattr(config, "dflash_config", None) or {}
        return any(_is_dflash_config(v) for v in node.values)
    return False


def dflash_config_keys(source: str) -> set[str]:
    """The keys a module reads from a ``dflash_config`` (directly or through a local alias)."""
    tree = ast.parse(source)
    aliases = {
        n.targets[0].id
        for n in ast.walk(tree)
        if isinstance(n, ast.Assign)
        and len(n.targets) == 1
        and isinstance(n.targets[0], ast.Name)
        and _is_dflash_config(n.value)
    }

    def is_config(node: ast.AST) -> bool:
        return _is_dflash_config(node) or (isinstance(node, ast.Name) and node.id in aliases)

    found = set()
    for n in ast.walk(tree):
        if (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and n.func.attr == "get"
            and is_config(n.func.value)
            and n.args
            and isinstance(n.args[0], ast.Constant)
        ):
            found.add(n.args[0].value)
        elif isinstance(n, ast.Subscript) and is_config(n.value) and isinstance(n.slice, ast.Constant):
            found.add(n.slice.value)
        elif (
            isinstance(n, ast.Compare)
            and len(n.ops) == 1
            and isinstance(n.ops[0], ast.In)
            and isinstance(n.left, ast.Constant)
            and is_config(n.comparators[0])
        ):
            found.add(n.left.value)
    return {k for k in found if isinstance(k, str)}


def wheel_keys(version: str, algorithm: str) -> set[str] | None:
    with zipfile.ZipFile(wheel(version)) as z:
        texts = [wheel_file(z, f"{MODELS}{f}") for f in FILES[algorithm]]  # a shimmed module followed
        if texts[0] is None:
            return None
        return set().union(*(dflash_config_keys(text) for text in texts if text is not None))


def carried(algorithm: str) -> set[str]:
    """What specreg carries into dflash_config for an algorithm: its module's extras and the native table."""
    extras = {
        key
        for key, _kind, where in algorithms.get(algorithm).function.__globals__[algorithm.upper()].extras
        if where == "dflash_config"
    }
    return extras | set(keys.CARRIED.get(algorithm, {}))


def uncovered(version: str, algorithm: str) -> set[str]:
    read = wheel_keys(version, algorithm) or set()
    return read - set(keys.CONSUMED) - {"sample_from_anchor"} - carried(algorithm)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("algorithm", sorted(FILES))
def test_every_dflash_config_key_a_wheel_reads_is_carried_or_written(version, algorithm):
    if wheel_keys(version, algorithm) is None:  # DFlash2 arrives in 0.28; specreg's vllm_min says 0.29
        assert algorithm == "dflash2" and version < "0.28"
        return
    assert uncovered(version, algorithm) == set()


def test_the_extraction_finds_the_keys_named_in_the_issue():
    assert {"input_embedding_scale", "output_multiplier", "final_logit_softcapping"} <= wheel_keys("0.33.0", "dflash2")
    assert "attention_sink_bias" in wheel_keys("0.33.0", "dflash")
    assert "attention_value_scale" in wheel_keys("0.31.0", "dflash") - wheel_keys("0.30.0", "dflash")


def test_dropping_a_dflash2_key_from_specregs_tables_fails_the_coverage(monkeypatch):
    module = algorithms.get("dflash2").function.__globals__
    variant = module["DFLASH2"]
    import attrs

    monkeypatch.setitem(
        module, "DFLASH2", attrs.evolve(variant, extras=tuple(e for e in variant.extras if e[0] != "output_multiplier"))
    )
    monkeypatch.setitem(
        keys.CARRIED, "dflash2", {k: v for k, v in keys.CARRIED["dflash2"].items() if k != "output_multiplier"}
    )
    assert uncovered("0.33.0", "dflash2") == {"output_multiplier"}


@pytest.mark.parametrize("version", ["0.28.0", "0.31.0", "0.33.0"])
def test_a_native_file_gets_every_key_the_wheel_reads_in_its_draft_config(version):
    values = {
        "attention_sink_bias": True,
        "attention_value_scale": 0.5,
        "input_embedding_scale": 78.38,
        "output_multiplier": 0.25,
        "final_logit_softcapping": 30.0,
    }
    for algorithm, fixture in (
        ("dflash", "zlab_dflash_qwen3_8b_fixture.json"),
        ("dflash2", "zlab_dflash2_museglimmer.json"),
    ):
        read = wheel_keys(version, algorithm)
        if read is None:
            continue
        config = copy.deepcopy(json.loads((DATA / "native" / fixture).read_text()))
        wanted = {k: v for k, v in values.items() if k in read}
        config["dflash_config"].update(wanted)
        spec = specreg.normalize(config, vllm=version, verifier="org/v")
        got = spec.draft_config_dict()["dflash_config"]
        assert {k: got.get(k) for k in wanted} == wanted, (algorithm, version)


@pytest.mark.parametrize("version", VERSIONS + ["0.20.0", "0.22.0", "0.24.0", "0.25.0"])
def test_each_wheel_refuses_mrope_when_the_drafter_adds_slots(version):
    """The rule specreg models (`check_startup`): `_raise_if_mrope` is called only under
    `needs_extra_input_slots`, which is `net_num_new_slots_per_request > 0`, and raises on the draft
    config's `uses_mrope`. Where the release has no such refusal (0.34 deleted it with Model Runner V1),
    the facts say so and specreg finds nothing."""
    from specreg import facts

    refused = facts.holds("mrope_refused_with_extra_slots", version)
    assert refuses_mrope(version) is refused, version
    spec = specreg.normalize(
        {
            **json.loads((DATA / "native" / "zlab_dflash_qwen3_8b_fixture.json").read_text()),
            "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
        },
        vllm=version,
        verifier="org/v",
    )
    assert ("vllm-startup-refusal" in {f.code for f in spec.findings}) is refused


def refuses_mrope(version: str) -> bool:
    """Whether the drafter raises on an M-RoPE draft config exactly when it adds input slots per request
    (rules.json mrope_refused_with_extra_slots)."""
    with zipfile.ZipFile(wheel(version)) as z:
        text = wheel_file(z, "vllm/v1/spec_decode/llm_base_proposer.py") or ""
    tree = ast.parse(text)
    guarded = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.If)
        and "needs_extra_input_slots" in ast.unparse(n.test)
        and "_raise_if_mrope" in ast.unparse(n)
    ]
    raiser = [ast.unparse(n) for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "_raise_if_mrope"]
    return (
        bool(guarded)
        and "self.needs_extra_input_slots = self.net_num_new_slots_per_request > 0" in text
        and any("draft_model_config.uses_mrope" in r and "does not support M-RoPE" in r for r in raiser)
    )


# -- model types vLLM takes for an MTP target's -------------------------------------------------------

ALL_WHEELS = ["0.20.0", "0.22.0", "0.24.0", "0.25.0", *VERSIONS]


@pytest.mark.parametrize("version", ALL_WHEELS)
def test_the_mtp_rewrite_table_is_each_wheels_own_hf_config_override(version):
    """specreg's `MTP_REWRITES`, read at `version`, is exactly what that wheel's function does to a
    draft config of each model_type it names (tests/conformance/draft_overrides.py runs it)."""
    from specreg.normalization.capabilities import parse_version
    from specreg.normalization.model_types import MTP_REWRITES, mtp_rewrite
    from tests.conformance.draft_overrides import rewrites

    ran = rewrites(version)
    assert "deepseek_v3" in ran  # the function was found and run
    table = {t: mtp_rewrite(t, parse_version(version)) for t in MTP_REWRITES}
    assert {t: v for t, v in table.items() if v is not None}.keys() == ran.keys()
    if version == ALL_WHEELS[-1]:
        assert {t: table[t] for t in ran} == ran


def config_registry(version: str) -> set[str]:
    """The model types of a wheel's `_CONFIG_REGISTRY` (vllm/transformers_utils/config.py, read with ast)."""
    with zipfile.ZipFile(wheel(version)) as z:
        tree = ast.parse(_required(z, "vllm/transformers_utils/config.py"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "_CONFIG_REGISTRY":
            for kw in node.value.keywords:
                found |= {kw.arg} if kw.arg else set(ast.literal_eval(kw.value))
    return found


@pytest.mark.parametrize("version", VERSIONS)
def test_every_model_type_of_vllms_config_registry_is_known(version):
    """vLLM's `_CONFIG_REGISTRY` of each wheel (the model types it ships config classes for) is inside
    specreg's known types, so no draft with one of them is called unknown."""
    from specreg.normalization.model_types import KNOWN_MODEL_TYPES, VLLM_MODEL_TYPES

    found = config_registry(version)
    assert found and found <= VLLM_MODEL_TYPES <= KNOWN_MODEL_TYPES


def test_vllms_table_is_the_union_of_the_wheels_registries():
    """specreg/vllm/facts/vllm_model_types.json is the wheels' (SPECREG_REGENERATE=1 writes it)."""
    from conformance.vllm_mapping import MODEL_TYPES_ABOUT, write_table

    got = {
        "releases": [v.rsplit(".", 1)[0] for v in VERSIONS],
        "model_types": sorted(set().union(*(config_registry(v) for v in VERSIONS))),
    }
    path = facts.FOLDER / "vllm_model_types.json"
    if os.environ.get("SPECREG_REGENERATE") == "1":
        write_table(path, MODEL_TYPES_ABOUT, got)
    assert {k: v for k, v in json.loads(path.read_text()).items() if k != "_about"} == got


# -- EAGLE-3: the keys its classes read from the draft config ------------------------------------------

EAGLE3_FILES = ["llama_eagle3.py", "qwen3_eagle3.py", "deepseek_eagle3.py"]
_NOT_KEYS = {"get", "to_dict", "update", "get_text_config", "__class__"}


def _is_draft_config(node: ast.AST) -> bool:
    return (isinstance(node, ast.Name) and node.id in ("config", "hf_config")) or (
        isinstance(node, ast.Attribute) and node.attr in ("config", "hf_config")
    )


def eagle3_reads(version: str) -> tuple[set[str], set[str]]:
    """(top-level keys, eagle_config keys) the wheel's EAGLE-3 draft classes read from the draft config:
    ``config.X``, ``getattr(config, "X", ...)``, ``hasattr(config, "X")``, and ``eagle_config`` reads."""
    top, nested = set(), set()
    with zipfile.ZipFile(wheel(version)) as z:
        sources = [text for f in EAGLE3_FILES if (text := wheel_file(z, MODELS + f)) is not None]
    for source in sources:
        tree = ast.parse(source)
        for n in ast.walk(tree):
            if (
                isinstance(n, ast.Attribute)
                and isinstance(n.ctx, ast.Load)
                and _is_draft_config(n.value)
                and n.attr not in _NOT_KEYS
            ):
                top.add(n.attr)
            elif (
                isinstance(n, ast.Call)
                and isinstance(n.func, ast.Name)
                and n.func.id in ("getattr", "hasattr")
                and len(n.args) >= 2
                and _is_draft_config(n.args[0])
                and isinstance(n.args[1], ast.Constant)
            ):
                top.add(n.args[1].value)
        aliases = {
            t.id
            for a in ast.walk(tree)
            if isinstance(a, ast.Assign)
            for t in a.targets
            if isinstance(t, ast.Name) and t.id == "eagle_config"
        }
        if aliases:
            nested |= dflash_config_keys(source.replace("eagle_config", "dflash_config"))
    top.discard("dflash_config")
    top.discard("eagle_config")
    return top, nested


def test_the_eagle3_extraction_finds_what_the_classes_read():
    top, nested = eagle3_reads("0.33.0")
    assert {
        "hidden_size",
        "rms_norm_eps",
        "norm_before_residual",
        "target_hidden_size",
        "draft_vocab_size",
        "kv_lora_rank",
        "q_lora_rank",
    } <= top
    assert {"use_aux_hidden_state", "norm_before_fc", "eagle_aux_hidden_state_layer_ids"} <= nested


@pytest.mark.parametrize("version", VERSIONS)
def test_every_eagle_config_key_a_wheel_reads_is_consumed(version):
    """A ModelOpt-style ``eagle_config`` is not passed through: each key vLLM reads from it must be one
    specreg rewrites to the top level (`keys.CONSUMED`)."""
    _, nested = eagle3_reads(version)
    assert nested and nested - set(keys.CONSUMED) == set()


def _eagle3_sources():
    for path in sorted((DATA / "real").glob("*/*.json")) + sorted((DATA / "native").glob("*.json")):
        config = json.loads(path.read_text())
        try:
            spec = specreg.normalize(config, vllm="0.33", verifier="org/v")
        except specreg.ConfigError:
            continue
        if spec.method == "eagle3" and spec.servable:
            yield path, config, spec


@pytest.mark.parametrize("version", ["0.26.0", "0.30.0", "0.33.0"])
def test_every_key_an_eagle3_file_carries_that_vllm_reads_arrives_with_its_value(version):
    """For every served EAGLE-3 config of tests/data (native and speculators format): each key its layer
    config holds that the wheel's EAGLE-3 classes read is in draft_config with the same value, unless
    specreg rewrites it with a recorded reason (the provenance says derived, from the key)."""
    top, _ = eagle3_reads(version)
    checked = 0
    for path, config, spec in _eagle3_sources():
        layer = config.get("transformer_layer_config", config)
        draft = spec.draft_config_dict()
        for key in sorted(top & set(layer)):
            checked += 1
            if draft.get(key) != layer[key]:
                prov = spec.provenance.get(f"draft_config.{key}")
                assert prov is not None and prov.kind == "derived", (path.name, key, layer[key], draft.get(key))
    assert checked > 100


@pytest.mark.parametrize("version", ["0.33.0"])
def test_every_other_key_of_an_eagle3_file_is_passed_through_or_tabled(version):
    known = set(keys.CONSUMED) | set(keys.TRAINED_SIDE) | set(keys.NOT_SERVED)
    for path, config, spec in _eagle3_sources():
        layer = config.get("transformer_layer_config", config)
        draft = spec.draft_config_dict()
        left = {k for k in layer if k not in draft and k not in known}
        assert left == set(), path.name


def test_dropping_an_eagle_config_key_from_specregs_tables_fails_the_coverage(monkeypatch):
    monkeypatch.delitem(keys.CONSUMED, "use_aux_hidden_state")
    _, nested = eagle3_reads("0.33.0")
    assert nested - set(keys.CONSUMED) == {"use_aux_hidden_state"}


# -- the native name tables against each wheel's model registry ------------------------------------------


def _registry(version: str) -> dict[str, tuple[str, str]]:
    import re

    with zipfile.ZipFile(wheel(version)) as z:
        text = _required(z, "vllm/model_executor/models/registry.py")
    return {
        name: (module, cls) for name, module, cls in re.findall(r'"(\w+)":\s*\(\s*"([\w.]+)",\s*"(\w+)",?\s*\)', text)
    }


def test_every_served_native_name_is_the_class_vllm_0_33_registry_serves_it_with():
    """Each architecture name a native layout serves is a key of vLLM 0.33's registry mapping to the
    same (module, class) as the registry name specreg writes; each vLLM-only name is served there by the
    module and class the refusal names."""
    from specreg.sources import native
    from specreg.sources.native.refused import VLLM_ONLY

    registry = _registry("0.33.0")
    #: names vLLM's registry serves with another class than the one the file was trained as, which
    #: specreg therefore replaces in architectures (sources/native/deepspec.py says why)
    renamed = {
        "DSparkDraftModel",  # DeepSeek-V4's DSpark in vLLM, DeepSpec's Qwen3 DSpark in the file
        "LlamaForCausalLM",
    }  # ModelOpt's EAGLE-3 export names the base model's class
    checked = 0
    for layout in native.layouts():
        for name, serves in layout.names.items():
            if not serves.vllm_class:
                continue
            assert serves.vllm_class in registry, (layout.format, serves.vllm_class)
            if name in registry:
                same = registry[name] == registry[serves.vllm_class]
                assert same != (name in renamed), (name, registry[name], serves.vllm_class)
                checked += 1
            if serves.module:
                assert registry[serves.vllm_class][0] == serves.module, (name, serves.module)
    for name, (module, cls) in VLLM_ONLY.items():
        assert name in registry, name
        got_module, got_cls = registry[name]
        assert got_cls == cls and got_module.split(".")[-1] == module.split(".")[-1], (name, registry[name])
    assert checked >= 5


# -- serve's reading of the user's vLLM flags ----------------------------------------------------------


def cli_options(version: str) -> dict[str, str]:
    """option string -> dest of every add_argument call of the wheel's engine/arg_utils.py (ast)."""
    with zipfile.ZipFile(wheel(version)) as z:
        tree = ast.parse(_required(z, "vllm/engine/arg_utils.py"))
    out = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "add_argument":
            strs = [a.value for a in n.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            if not strs or not strs[0].startswith("-"):
                continue
            longs = [s for s in strs if s.startswith("--")]
            dest = (longs[0] if longs else strs[0]).lstrip("-").replace("-", "_")
            out.update({s: dest for s in strs})
    return out


@pytest.mark.parametrize("version", ["0.20.0", *VERSIONS])
def test_serves_option_table_is_each_wheels_spelling_of_those_settings(version):
    """Every option string a wheel gives the settings serve writes or hints is in specreg's table with
    the same setting, and the table names none the wheel lacks (the --spec-* flags from 0.22)."""
    from packaging.version import Version

    from specreg.vllm.flags import OPTIONS, SPEC_FLAGS_SINCE

    found = {o: d for o, d in cli_options(version).items() if d in set(OPTIONS.values())}
    expected = {
        o: d for o, d in OPTIONS.items() if not (d.startswith("spec_") and Version(version) < Version(SPEC_FLAGS_SINCE))
    }
    assert found == expected
