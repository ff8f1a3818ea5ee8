"""specreg.vllm.deployment's tables against the code that decides them in each wheel 0.26-0.33 (ast,
read from the wheel; pytest -m conformance)."""

from __future__ import annotations

import ast
import zipfile

import pytest
from packaging.version import Version

from specreg import facts
from specreg.vllm import deployment
from tests.conformance.vllm_mapping import wheel, wheel_file

pytestmark = pytest.mark.conformance

VERSIONS = [facts.wheel(r) for r in facts.tested_by("deployment_rules")]
#: the methods vLLM's speculators path serves drafts with (specreg's algorithms' methods)
SERVED_METHODS = {"eagle3", "dflash", "dspark"}


def source(version: str, path: str) -> ast.Module | None:
    with zipfile.ZipFile(wheel(version)) as z:
        text = wheel_file(z, path)  # a module moved behind a sys.modules shim is followed
    return None if text is None else ast.parse(text)


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def raised_methods(version: str) -> tuple[set[str] | str, frozenset | None]:
    """The methods whose draft max_position_embeddings speculative.py raises ("all but draft_model"
    from a `self.method != "draft_model"` guard), and the RoPE types it raises them for."""
    tree = source(version, "vllm/config/speculative.py")
    parents = _parents(tree)
    guards: set[str] | str = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "_maybe_override_draft_max_position_embeddings"
        ):
            up = parents[node]
            while not isinstance(up, ast.If):
                up = parents[up]
            test = up.test
            assert isinstance(test, ast.Compare) and ast.unparse(test.left) == "self.method", ast.unparse(test)
            if isinstance(test.ops[0], ast.In):
                guards |= {e.value for e in test.comparators[0].elts}
            else:
                assert isinstance(test.ops[0], ast.NotEq) and test.comparators[0].value == "draft_model"
                guards = "all but draft_model"
    ropes = None
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(
            getattr(t, "id", None) == "_CACHE_ONLY_ROPE_TYPES" for t in node.targets
        ):
            ropes = frozenset(ast.literal_eval(node.value.args[0]))
    gated = "_rope_only_sizes_cache(draft_hf_config)" in ast.unparse(tree)
    if not guards:
        guards = shared_position_methods(version)
    return guards, ropes if gated else None


SPEC_DECODE = "vllm/v1/worker/gpu/spec_decode"


def shared_position_methods(version: str) -> set[str]:
    """From 0.34 the call is the V2 runner's (speculator_config.py, DraftModelSpeculatorConfig.configure),
    guarded by the method's config class's `shares_target_positions`: the methods of `_CONFIG_BY_METHOD`
    whose class (through its bases, across spec_decode's config files) has it true."""
    tree = source(version, f"{SPEC_DECODE}/speculator_config.py")
    if tree is None or "config_cls.shares_target_positions" not in ast.unparse(tree):
        return set()
    classes: dict[str, tuple[list[str], bool | None]] = {}
    with zipfile.ZipFile(wheel(version)) as z:
        for name in z.namelist():
            if name.startswith(SPEC_DECODE) and name.endswith(".py"):
                for node in ast.walk(ast.parse(z.read(name))):
                    if isinstance(node, ast.ClassDef):
                        own = None
                        for item in node.body:
                            target = item.target if isinstance(item, ast.AnnAssign) else None
                            if isinstance(item, ast.Assign) and len(item.targets) == 1:
                                target = item.targets[0]
                            if getattr(target, "id", None) == "shares_target_positions":
                                own = ast.literal_eval(item.value)
                        classes[node.name] = ([ast.unparse(b) for b in node.bases], own)

    def shares(cls: str) -> bool:
        bases, own = classes.get(cls, ([], None))
        return own if own is not None else any(shares(b) for b in bases)

    table = next(
        n.value
        for n in ast.walk(tree)
        if isinstance(n, (ast.Assign, ast.AnnAssign))
        and getattr(n.target if isinstance(n, ast.AnnAssign) else n.targets[0], "id", None) == "_CONFIG_BY_METHOD"
    )
    methods = {ast.literal_eval(k): ast.literal_eval(v.args[1]) for k, v in zip(table.keys, table.values)}
    return {method for method, cls in methods.items() if shares(cls)}


@pytest.mark.parametrize("version", ["0.20.0", "0.22.0", "0.24.0", "0.25.0", *VERSIONS])
def test_which_drafts_get_their_positions_raised_is_the_wheels(version):
    guards, ropes = raised_methods(version)
    v = Version(version)
    table = [row for row in deployment.RAISES_MAX_POSITIONS if v >= row[0]][-1]
    if guards == "all but draft_model":
        assert SERVED_METHODS | {"eagle", "mtp"} <= table[1]
    else:
        assert guards == set(table[1])
    assert ropes == table[2]


@pytest.mark.parametrize("version", VERSIONS)
def test_the_draft_runs_in_the_verifiers_dtype(version):
    """SpeculativeConfig builds the draft's ModelConfig with dtype=self.target_model_config.dtype (from
    0.34 the V2 runner's DraftModelSpeculatorConfig.configure does, with dtype=target.dtype, where
    target is spec.target_model_config)."""
    tree = source(version, "vllm/config/speculative.py")
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and ast.unparse(n.func) == "ModelConfig"]
    dtypes = {ast.unparse(k.value) for c in calls for k in c.keywords if k.arg == "dtype"}
    if not dtypes:
        v2 = source(version, f"{SPEC_DECODE}/speculator_config.py")
        assert v2 is not None and "target = spec.target_model_config" in ast.unparse(v2)
        calls = [n for n in ast.walk(v2) if isinstance(n, ast.Call) and ast.unparse(n.func) == "ModelConfig"]
        dtypes = {ast.unparse(k.value) for c in calls for k in c.keywords if k.arg == "dtype"}
        assert dtypes == {"target.dtype"}
        return
    assert dtypes == {"self.target_model_config.dtype"}


@pytest.mark.parametrize("version", VERSIONS)
def test_every_draft_class_takes_the_drafts_own_quantization_config(version):
    """The draft classes build their layers with get_draft_quant_config; none reads the verifier's
    vllm_config.quant_config (DFlash2 and DSpark subclass the DFlash classes)."""
    checked = 0
    for module in ("llama_eagle3", "qwen3_eagle3", "deepseek_eagle3", "qwen3_dflash", "qwen3_dflash2", "qwen3_dspark"):
        tree = source(version, f"vllm/model_executor/models/{module}.py")
        if tree is None:
            continue
        text = ast.unparse(tree)
        assert "vllm_config.quant_config" not in text, module
        if module in ("qwen3_dflash2", "qwen3_dspark"):
            assert "DFlashQwen3" in text, module  # built on the DFlash classes
        else:
            assert "get_draft_quant_config(vllm_config)" in text, module
        checked += 1
    assert checked >= 4


DRAFTER = "vllm/v1/spec_decode/llm_base_proposer.py"


@pytest.mark.parametrize("version", ["0.24.0", "0.25.0", *VERSIONS])
def test_the_drafter_selects_its_own_backend_and_inherits_the_kv_cache_dtype(version):
    """_create_draft_vllm_config replaces the server's attention backend by speculative_config's
    (None: select), and from 0.26 the KV-cache dtype when speculative_config sets one (before, the
    draft always has the server's)."""
    from specreg.vllm.gpu_plan import DRAFT_KV_CACHE_DTYPE_SINCE

    if source(version, DRAFTER) is None:  # 0.34: no V1 drafter; apply_draft_overrides' table holds both
        spec = ast.unparse(source(version, "vllm/config/speculative.py"))
        assert "('attention_backend', 'attention_config', 'backend')" in spec
        assert draft_has_own_kv_cache_dtype(version)
        return
    assert "backend=spec_cfg.attention_backend" in ast.unparse(_draft_config_builder(version))
    own_kv = draft_has_own_kv_cache_dtype(version)
    assert own_kv == (Version(version) >= Version(DRAFT_KV_CACHE_DTYPE_SINCE))


def _draft_config_builder(version: str) -> ast.FunctionDef | None:
    tree = source(version, DRAFTER)
    found = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "_create_draft_vllm_config"]
    assert len(found) <= 1, version
    return found[0] if found else None


def draft_has_own_kv_cache_dtype(version: str) -> bool:
    """Whether the draft gets speculative_config's KV-cache dtype when set (rules.json
    draft_kv_cache_dtype): V1's _create_draft_vllm_config where the wheel has Model Runner V1; from 0.34
    (V1 deleted) the V2 loaders of every method specreg serves (dflash/utils.py load_dflash_model,
    dspark/utils.py load_dspark_model, and eagle/utils.py through apply_draft_overrides' table)."""
    if source(version, DRAFTER) is not None:
        fn = _draft_config_builder(version)
        return fn is not None and "if spec_cfg.kv_cache_dtype is not None" in ast.unparse(fn)
    loaders = {"dflash/utils.py": "load_dflash_model", "dspark/utils.py": "load_dspark_model"}
    for path, name in loaders.items():
        tree = source(version, f"{SPEC_DECODE}/{path}")
        fns = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name] if tree else []
        text = ast.unparse(fns[0]) if fns else ""
        if "cache_dtype=speculative_config.kv_cache_dtype" not in text:
            return False
    eagle = source(version, f"{SPEC_DECODE}/eagle/utils.py")
    spec = ast.unparse(source(version, "vllm/config/speculative.py"))
    return (
        eagle is not None
        and "speculative_config.apply_draft_overrides(vllm_config)" in ast.unparse(eagle)
        and "('kv_cache_dtype', 'cache_config', 'cache_dtype')" in spec
    )


@pytest.mark.parametrize("version", ["0.24.0", "0.25.0", *VERSIONS])
def test_the_v2_eagle_drafter_keeps_the_servers_backend_from_0_31(version):
    from specreg.vllm.gpu_plan import V2_EAGLE_INHERITS_BACKEND_SINCE

    keeps = v2_eagle_keeps_backend(version)
    assert keeps == (Version(version) >= Version(V2_EAGLE_INHERITS_BACKEND_SINCE))
    if keeps:
        spec = ast.unparse(source(version, "vllm/config/speculative.py"))
        assert "('attention_backend', 'attention_config', 'backend')" in spec


def v2_eagle_keeps_backend(version: str) -> bool:
    """Whether the V2 Eagle drafter's config comes from apply_draft_overrides (v2_eagle_inherits_backend)."""
    tree = source(version, "vllm/v1/worker/gpu/spec_decode/eagle/utils.py")
    return tree is not None and "speculative_config.apply_draft_overrides(vllm_config)" in ast.unparse(tree)


@pytest.mark.parametrize("version", ["0.24.0", "0.25.0", *VERSIONS])
def test_the_draft_tensor_parallel_size_is_1_or_the_verifiers(version):
    """`_verify_and_get_draft_tp`: unset takes the target's; anything but 1 or the target's is refused
    (specreg.vllm.preflight's draft-tp rule)."""
    tree = source(version, "vllm/config/speculative.py")
    (fn,) = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "_verify_and_get_draft_tp"]
    text = ast.unparse(fn)
    assert "speculative_draft_tensor_parallel_size not in (1, target_parallel_config.tensor_parallel_size)" in text
    assert "raise ValueError" in text


ALL = ["0.20.0", "0.22.0", "0.24.0", "0.25.0", *VERSIONS]
MODELS = "vllm/model_executor/models"


def registry(version: str) -> dict[str, str]:
    """The speculative architectures of registry.py: name -> module."""
    tree = source(version, f"{MODELS}/registry.py")
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values):
                if isinstance(k, ast.Constant) and isinstance(v, ast.Tuple) and len(v.elts) == 2:
                    out[k.value] = v.elts[0].value
    return out


def text(version: str, module: str) -> str | None:
    tree = source(version, f"{MODELS}/{module}.py")
    return None if tree is None else ast.unparse(tree)


def layer_module(version: str, module: str) -> str:
    """The module whose model builds the layers: the architecture's own when it names its layers
    with start_layer_id, else the DFlash one its model subclasses."""
    own = text(version, module)
    if "f'layers.{layer_idx + start_layer_id}'" in own:
        return module
    assert "from .qwen3_dflash import" in own and "(DFlashQwen3Model)" in own, module
    return "qwen3_dflash"


@pytest.mark.parametrize("version", ALL)
def test_which_quantization_names_each_draft_class_renames_is_the_wheels(version):
    """The draft classes name layer i `layers.{i + start_layer_id}` (start_layer_id: the verifier's
    layer count); what of the draft's quantization config they rename to match is QUANT_LAYER_NAMES."""
    reg = registry(version)
    present = {a: m for a, m in deployment.DRAFT_LAYER_MODULES.items() if a in reg}
    assert "Eagle3LlamaForCausalLM" in present
    for arch, module in present.items():
        assert layer_module(version, reg[arch]) == module, arch
        src = text(version, module)
        assert "start_layer_id=target_layer_num" in src
        # so layer i runs as model.layers.{i + L}
        assert "prefix=maybe_prefix(prefix, 'model')" in src or "prefix='model'" in src
        assert (
            "target_layer_num = vllm_config.model_config.get_num_layers(" in src
            or "target_layer_num = vllm_config.model_config.get_total_num_hidden_layers()" in src
        )
        calls_map, calls_exclusions = renames(src)
        derived = "modelopt" if calls_map else "modelopt exclusions" if calls_exclusions else "nothing"
        assert derived == deployment._at(version, deployment.QUANT_LAYER_NAMES[module]), (arch, module)
        if calls_exclusions:
            assert f"re.compile({deployment.EXCLUSION_RENAMED.pattern!r})" in src
            assert "getattr(quant_config, 'exclude_modules', None)" in src
        if calls_map:
            utils = text(version, "utils")
            assert "if isinstance(quant_config, ModelOptQuantConfigBase):" in utils
            assert "layers\\\\.{index}(?=\\\\.|\\\\*|$)" in utils and "'(?:{re.escape(prefix)}\\\\.)?'" in utils
    # the exclude_modules vLLM renames exist on ModelOpt's configs only
    with zipfile.ZipFile(wheel(version)) as z:
        having = {
            n
            for n in z.namelist()
            if n.startswith("vllm/model_executor/layers/quantization/")
            and n.endswith(".py")
            and b"self.exclude_modules" in z.read(n)
        }
    assert having <= {"vllm/model_executor/layers/quantization/modelopt.py"}, having


def renames(src: str) -> tuple[bool, bool]:
    """Whether a draft module's source renames every ModelOpt name (map_draft_quant_config), and whether
    it renames only the exclusions (_add_global_draft_layer_exclusions)."""
    calls_map = "map_draft_quant_config(self.quant_config" in src
    return calls_map, "_add_global_draft_layer_exclusions(" in src and not calls_map


def dflash_renames(version: str) -> str:
    """What of a draft's quantization config qwen3_dflash renames: "nothing", "modelopt exclusions" or
    "modelopt" (rules.json dflash_renames_modelopt_exclusions and _names)."""
    calls_map, calls_exclusions = renames(text(version, "qwen3_dflash") or "")
    return "modelopt" if calls_map else "modelopt exclusions" if calls_exclusions else "nothing"


def quantized_names(version: str, module: str) -> set[str]:
    """The names the module's draft model (the class that numbers its layers with start_layer_id)
    gives the modules it builds with a quantization config: `prefix=maybe_prefix(prefix, "NAME")`
    beside `quant_config=` (an f-string name, the layers', is left out)."""
    names = set()
    models = [
        c
        for c in ast.walk(source(version, f"{MODELS}/{module}.py"))
        if isinstance(c, ast.ClassDef) and "layer_idx + start_layer_id" in ast.unparse(c)
    ]
    assert models, module
    for node in (n for c in models for n in ast.walk(c)):
        if not isinstance(node, ast.Call):
            continue
        kw = {k.arg: k.value for k in node.keywords}
        quant, prefix = kw.get("quant_config"), kw.get("prefix")
        if quant is None or (isinstance(quant, ast.Constant) and quant.value is None):
            continue
        if (
            isinstance(prefix, ast.Call)
            and getattr(prefix.func, "id", None) == "maybe_prefix"
            and len(prefix.args) == 2
            and isinstance(prefix.args[1], ast.Constant)
        ):
            names.add(prefix.args[1].value)
    return names


@pytest.mark.parametrize("version", ALL)
def test_the_drafts_other_quantized_modules_run_under_model(version):
    """Besides its layers, the draft's model (built under the prefix `model`) builds MODEL_MODULES with
    the quantization config; the outer class builds lm_head, whose name is the checkpoint's. A
    compressed-tensors ignore list matches whole names (or re: patterns); ModelOpt's exclusions also
    match substrings, so `fc` excludes `model.fc` there."""
    reg = registry(version)
    for arch, module in {a: m for a, m in deployment.DRAFT_LAYER_MODULES.items() if a in reg}.items():
        names = quantized_names(version, module) - {"lm_head", "model"}
        assert names == set(deployment.MODEL_MODULES), (arch, module, names)
    src = "\n".join(
        ast.unparse(t)
        for t in (
            source(version, "vllm/model_executor/layers/quantization/utils/config_utils.py"),
            source(version, "vllm/model_executor/layers/quantization/compressed_tensors/utils.py"),
        )
        if t is not None
    )
    assert "target == value" in src or "value == target" in src, "compressed-tensors: whole-name matching"
    assert "exclude_module in prefix" in ast.unparse(
        source(version, "vllm/model_executor/layers/quantization/modelopt.py")
    )


@pytest.mark.parametrize("version", ALL)
def test_vllm_reads_a_top_level_quantization_config_whatever_the_format(version):
    """get_config sets the config's quantization_config from the file's top level (or, without one,
    hf_quant_config.json) after any config class built it, so the directory `serve` writes, whose
    config.json is specreg's, carries it (core._carry_quantization, materialize.hf_quant_config)."""
    tree = source(version, "vllm/transformers_utils/config.py")
    (fn,) = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "get_config"]
    body = ast.unparse(fn)
    assert "quantization_config = config_dict.get('quantization_config', None)" in body
    assert "if quantization_config is None and file_or_path_exists(model, 'hf_quant_config.json', revision):" in body
    assert "config.quantization_config = quantization_config" in body


@pytest.mark.parametrize("version", ALL)
def test_a_chunked_local_attention_verifier_and_an_eagle_drafter_turn_the_hybrid_manager_off(version):
    tree = source(version, "vllm/config/vllm.py")
    ifs = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.If)
        and ast.unparse(n.test).startswith("self.model_config is not None and self.model_config.attention_chunk_size")
    ]
    (branch,) = ifs
    (inner,) = [n for n in branch.body if isinstance(n, ast.If)]
    # 0.34 asks the method's speculator config (`uses_target_hidden_states`: the same methods)
    assert any(
        ask in ast.unparse(inner.test)
        for ask in ("self.speculative_config.use_eagle()", "self.speculative_config.uses_target_hidden_states")
    )
    assert ast.unparse(inner.body[-1]) == "need_disable_hybrid_kv_cache_manager = True"
    assert "VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE" in ast.unparse(inner.orelse)
    assert use_eagle_methods(version) == deployment._at(version, deployment.EAGLE_METHODS)


def use_eagle_methods(version: str) -> set[str]:
    """The methods SpeculativeConfig.use_eagle() answers True for (use_eagle_includes_dspark)."""
    spec = source(version, "vllm/config/speculative.py")
    (fn,) = [n for n in ast.walk(spec) if isinstance(n, ast.FunctionDef) and n.name == "use_eagle"]
    (ret,) = [n for n in ast.walk(fn) if isinstance(n, ast.Return)]
    return set(ast.literal_eval(ret.value.comparators[0]))


@pytest.mark.parametrize("version", ALL)
def test_which_draft_classes_build_attention_sinks_is_the_wheels(version):
    """qwen3_dflash's decoder layer reads dflash_config.attention_sink_bias (else the top-level
    add_swa_attention_sink_bias) and gives the Attention its sinks; the classes built on it share them."""
    from specreg.vllm.gpu_plan import SINK_ARCHITECTURES

    for arch in (*SINK_ARCHITECTURES, "Eagle3LlamaForCausalLM", "Eagle3Qwen3ForCausalLM"):
        since = SINK_ARCHITECTURES.get(arch)
        assert builds_sinks(version, arch) == (since is not None and Version(version) >= Version(since)), arch


def builds_sinks(version: str, arch: str) -> bool:
    """Whether the wheel's registered class `arch` builds attention sinks (sinks_* in rules.json)."""
    reg = registry(version)
    if arch not in reg:
        return False
    dflash = text(version, "qwen3_dflash") or ""
    reads = (
        "dflash_config.get('attention_sink_bias', getattr(config, 'add_swa_attention_sink_bias', False))" in dflash
        and "sinks=self.attention_sink_bias" in dflash
    )
    return "sinks=" in (text(version, reg[arch]) or "") or (
        layer_module(version, reg[arch]) == "qwen3_dflash" and reads
    )


@pytest.mark.parametrize("version", ["0.24.0", "0.25.0", *VERSIONS])
def test_gpt_oss_gives_every_layer_sinks_and_even_layers_the_window(version):
    """specreg.vllm.gpu_plan.VERIFIER_CLASSES: gpt_oss.py's attention makes its sinks unconditionally,
    passes them to Attention, and gives config.sliding_window to even layers only."""
    from specreg.vllm.gpu_plan import VERIFIER_CLASSES

    assert registry(version)["GptOssForCausalLM"] == "gpt_oss"
    tree = source(version, f"{MODELS}/gpt_oss.py")
    (cls,) = [c for c in ast.walk(tree) if isinstance(c, ast.ClassDef) and c.name == "OAIAttention"]
    (init,) = [f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"]
    top = [ast.unparse(n) for n in init.body]  # statements of __init__ itself, not under an if
    assert any(t.startswith("self.sinks = ") for t in top)
    body = ast.unparse(cls)
    assert "sliding_window = config.sliding_window if self.layer_idx % 2 == 0 else None" in body
    assert "per_layer_sliding_window=sliding_window" in body and "sinks=self.sinks" in body
    assert VERIFIER_CLASSES["GptOssForCausalLM"] == {"sliding": "even", "sinks": True}


GPU_VERSIONS = [facts.wheel(r) for r in facts.tested_by("deployment_rules_gpu")]


@pytest.fixture(scope="module")
def quantization_methods():
    import os

    from tests.conformance import quantization_methods as qm

    got = {v.rsplit(".", 1)[0]: qm.methods(v) for v in GPU_VERSIONS}
    if os.environ.get("SPECREG_REGENERATE") == "1":
        qm.regenerate(got)
        deployment._quantization_methods.cache_clear()
    return got


@pytest.mark.parametrize("version", GPU_VERSIONS)
def test_the_committed_quantization_methods_are_the_wheels(quantization_methods, version):
    """Each method's class, minimum capability and activation dtypes, as _get_quantization_config
    checks them (specreg/vllm/facts/<X.Y>/quantization_methods.json)."""
    from specreg.vllm.fact_files import read_facts

    key = version.rsplit(".", 1)[0]
    committed = read_facts(key, "quantization_methods")
    assert committed == quantization_methods[key]
    assert {"fp8", "compressed-tensors", "modelopt", "modelopt_fp4", "awq", "gptq"} <= set(committed)
    text = ast.unparse(source(version, "vllm/config/vllm.py"))
    assert "if capability < quant_config.get_min_capability():" in text
    assert "if model_config.dtype not in supported_dtypes:" in text
    # the draft's config goes through the same check (get_draft_quant_config -> get_quantization_config)
    utils = ast.unparse(source(version, f"{MODELS}/utils.py"))
    assert "VllmConfig.get_quantization_config(draft_model_config, draft_load_config)" in utils


def test_the_quantization_methods_differ_where_the_wheels_do(quantization_methods):
    assert [quantization_methods[v]["modelopt"]["min_capability"] for v in ("0.26", "0.27")] == [89, 80]
    assert ["bitsandbytes" in quantization_methods[v] for v in ("0.27", "0.28")] == [True, False]
