"""specreg.vllm.deployment's tables against the code that decides them in each wheel 0.26-0.33 (ast,
read from the wheel; pytest -m conformance)."""

from __future__ import annotations

import ast
import zipfile

import pytest
from packaging.version import Version

from specreg.vllm import deployment
from tests.conformance.vllm_mapping import wheel

pytestmark = pytest.mark.conformance

VERSIONS = ["0.26.0", "0.27.0", "0.28.0", "0.29.0", "0.30.0", "0.31.0", "0.32.0", "0.33.0"]
#: the methods vLLM's speculators path serves drafts with (specreg's algorithms' methods)
SERVED_METHODS = {"eagle3", "dflash", "dspark"}


def source(version: str, path: str) -> ast.Module | None:
    with zipfile.ZipFile(wheel(version)) as z:
        try:
            return ast.parse(z.read(path))
        except KeyError:
            return None


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def raised_methods(version: str) -> tuple[set[str] | str, frozenset | None]:
    """The methods whose draft max_position_embeddings speculative.py raises ("all but draft_model"
    from a `self.method != "draft_model"` guard), and the RoPE types it raises them for."""
    tree = source(version, "vllm/config/speculative.py")
    parents = _parents(tree)
    guards: set[str] | str = set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "_maybe_override_draft_max_position_embeddings"):
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
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "_CACHE_ONLY_ROPE_TYPES" for t in node.targets):
            ropes = frozenset(ast.literal_eval(node.value.args[0]))
    gated = "_rope_only_sizes_cache(draft_hf_config)" in ast.unparse(tree)
    return guards, ropes if gated else None


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
    """SpeculativeConfig builds the draft's ModelConfig with dtype=self.target_model_config.dtype."""
    tree = source(version, "vllm/config/speculative.py")
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and ast.unparse(n.func) == "ModelConfig"]
    dtypes = {ast.unparse(k.value) for c in calls for k in c.keywords if k.arg == "dtype"}
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
    from specreg.vllm.attention import DRAFT_KV_CACHE_DTYPE_SINCE

    tree = source(version, DRAFTER)
    (fn,) = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "_create_draft_vllm_config"]
    text = ast.unparse(fn)
    assert "backend=spec_cfg.attention_backend" in text
    own_kv = "if spec_cfg.kv_cache_dtype is not None" in text
    assert own_kv == (Version(version) >= Version(DRAFT_KV_CACHE_DTYPE_SINCE))


@pytest.mark.parametrize("version", ["0.24.0", "0.25.0", *VERSIONS])
def test_the_v2_eagle_drafter_keeps_the_servers_backend_from_0_31(version):
    from specreg.vllm.attention import V2_EAGLE_INHERITS_BACKEND_SINCE

    tree = source(version, "vllm/v1/worker/gpu/spec_decode/eagle/utils.py")
    keeps = tree is not None and "speculative_config.apply_draft_overrides(vllm_config)" in ast.unparse(tree)
    assert keeps == (Version(version) >= Version(V2_EAGLE_INHERITS_BACKEND_SINCE))
    if keeps:
        spec = ast.unparse(source(version, "vllm/config/speculative.py"))
        assert "('attention_backend', 'attention_config', 'backend')" in spec


@pytest.mark.parametrize("version", ["0.24.0", "0.25.0", *VERSIONS])
def test_the_draft_tensor_parallel_size_is_1_or_the_verifiers(version):
    """`_verify_and_get_draft_tp`: unset takes the target's; anything but 1 or the target's is refused
    (specreg.vllm.preflight's draft-tp rule)."""
    tree = source(version, "vllm/config/speculative.py")
    (fn,) = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "_verify_and_get_draft_tp"]
    text = ast.unparse(fn)
    assert "speculative_draft_tensor_parallel_size not in (1, target_parallel_config.tensor_parallel_size)" in text
    assert "raise ValueError" in text
