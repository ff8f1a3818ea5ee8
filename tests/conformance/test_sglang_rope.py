"""The SGLang rules' `rope` and `vocab` entries (what specreg.sglang.agreement compares) against the code
they were read from: the SGLang wheel each rules file names, and the transformers release that wheel pins (whose config
classes fold the RoPE fields before SGLang's classes read them). Read with ast, nothing imported
(pytest -m conformance; the wheels are downloaded once into ~/.cache/specreg/)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from specreg.sglang import agreement
from specreg.sglang.rules import known, rules

pytestmark = pytest.mark.conformance

CACHE = Path.home() / ".cache" / "specreg"


def _wheel(name: str, version: str, folder: str) -> Path:
    where = CACHE / folder
    found = sorted(where.glob(f"{name}-{version}-*.whl"))
    if not found:
        where.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q",
             f"{name}==={version}", "-d", str(where)],
            check=True,
        )  # fmt: skip
        found = sorted(where.glob(f"{name}-{version}-*.whl"))
    return found[-1]


def _function(tree: ast.AST, cls: str, name: str) -> ast.FunctionDef:
    klass = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == cls)
    return next(n for n in klass.body if isinstance(n, ast.FunctionDef) and n.name == name)


def _getattr_names(fn: ast.AST) -> list[str]:
    """The names of `getattr(config, "NAME", ...)` calls, in order."""
    return [
        n.args[1].value
        for n in ast.walk(fn)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Name)
        and n.func.id == "getattr"
        and len(n.args) >= 2
        and ast.unparse(n.args[0]) == "config"
        and isinstance(n.args[1], ast.Constant)
    ]


def _constants(fn: ast.AST) -> set[str]:
    return {n.value for n in ast.walk(fn) if isinstance(n, ast.Constant) and isinstance(n.value, str)}


@pytest.fixture(scope="module", params=list(known()))
def release(request):
    r = rules(request.param)
    with zipfile.ZipFile(_wheel("sglang", r["sglang"], "sglang-wheels")) as z:
        code = {
            name: z.read(f"sglang/srt/{name}").decode()
            for name in (
                "models/dflash.py",
                "models/llama.py",
                "models/llama_eagle3.py",
                "models/dspark.py",
                "speculative/eagle_worker_v2.py",
                "speculative/dflash_worker_v2.py",
                "speculative/draft_worker_common.py",
                "configs/model_config.py",
            )
        }
        pinned = re.search(
            r"^Requires-Dist: transformers==([\w.]+)$",
            z.read(f"sglang-{r['sglang']}.dist-info/METADATA").decode(),
            re.M,
        )
    return r, code, pinned.group(1)


def test_the_dflash_family_classes_read_what_the_rules_say(release):
    r, code, _ = release
    rope, fn = r["rope"], _function(ast.parse(code["models/dflash.py"]), "DFlashAttention", "__init__")
    reader = rope["readers"]["DFLASH"]
    names = _getattr_names(fn)
    assert [n for n in names if n in reader["neox_style"] + ["is_neox_style"]] == reader["neox_style"]
    assert set(rope["top_level"]) <= set(names)
    assert reader["rotary_dim"] in _constants(fn)  # rope_scaling["rope_dim"]
    assert "get_rope_config" in ast.unparse(fn)
    assert not reader["original_max_top_level"] and "original_max_position_embeddings" not in _constants(fn)
    # DSpark's classes are DFlash's, with DFlashAttention's reading: none of them builds its own rotary
    dspark = ast.parse(code["models/dspark.py"])
    model = next(n for n in ast.walk(dspark) if isinstance(n, ast.ClassDef) and n.name == "DSparkDraftModel")
    assert "DFlashDraftModel" in [ast.unparse(b) for b in model.bases]
    assert "get_rope(" not in code["models/dspark.py"]
    assert rope["readers"]["DSPARK"] == {**reader, "from": rope["readers"]["DSPARK"]["from"]}


def test_the_eagle3_class_reads_what_the_rules_say(release):
    r, code, _ = release
    rope, tree = r["rope"], ast.parse(code["models/llama.py"])
    reader = rope["readers"]["EAGLE3"]
    fns = [_function(tree, "LlamaDecoderLayer", "__init__"), _function(tree, "LlamaAttention", "__init__")]
    names = [n for fn in fns for n in _getattr_names(fn)]
    assert [n for n in names if n.endswith("neox_style")] == reader["neox_style"]
    assert set(rope["top_level"]) <= set(names)
    assert reader["rotary_dim"] is None and not any("rope_dim" in _constants(fn) for fn in fns)
    assert reader["original_max_top_level"] and "original_max_position_embeddings" in names
    # llama_eagle3's layer subclasses llama's and builds no rotary embedding of its own
    assert "class LlamaDecoderLayer(LlamaDecoderLayer)" in code["models/llama_eagle3.py"]
    assert "get_rope(" not in code["models/llama_eagle3.py"]


def test_the_cited_lines_hold_what_they_are_cited_for(release):
    r, code, _ = release
    cited = {
        ("models/llama.py", 199): "partial_rotary_factor",
        ("models/dflash.py", 254): "partial_rotary_factor",
        ("models/dflash.py", 210): "head_dim",
        ("models/dspark.py", 967): "DFlashDraftModel",
        ("models/llama_eagle3.py", 46): "class LlamaDecoderLayer",
    }
    text = " ".join(r["rope"][k] if isinstance(r["rope"][k], str) else "" for k in r["rope"])
    text += " ".join(v["from"] for v in r["rope"]["readers"].values())
    for (path, line), token in cited.items():
        assert f"{path}:{line}" in text
        assert token in code[path].splitlines()[line - 1], (path, line)


def test_the_vocab_entry_and_the_positions_refusal_hold_what_they_are_cited_for(release):
    """The rules' `vocab` (and agreement.py's reason to compare no maximum positions): each cited range
    of the wheel holds the call it is cited for."""
    r, code, _ = release
    cited = {
        ("speculative/eagle_worker_v2.py", 352, 363): ("load_lm_head_from_target", "set_embed(embed)"),
        ("models/llama.py", 910, 918): ("def set_embed(", "target_hidden_size", "embed_tokens.weight = embed"),
        ("models/llama.py", 895, 899): ("def set_embed_and_head(", "embed_tokens.weight = embed"),
        ("speculative/dflash_worker_v2.py", 2490, 2493): ("_resolve_dflash_embedding_module", "target_model"),
        ("models/dspark.py", 550, 555): ("def attach_shared_modules", "self.lm_head = lm_head"),
        ("models/dspark.py", 633, 641): ("_DSPARK_SKIPPED_WEIGHT_PREFIXES", '"embed_tokens."'),
    }
    text = " ".join(v["from"] for v in r["vocab"].values())
    for (path, first, last), tokens in cited.items():
        assert f"{path}:{first}-{last}" in text or f":{first}-{last}" in text, (path, first)
        lines = "\n".join(code[path].splitlines()[first - 1 : last])
        assert all(t in lines for t in tokens), (path, first, last)
    positions = {
        ("configs/model_config.py", 1291, 1320): ("def _derive_context_length", "raise ValueError"),
        ("speculative/eagle_worker_v2.py", 229, 229): ("context_length=target_worker",),
        ("speculative/draft_worker_common.py", 100, 100): ("context_length=target_model_config.context_len",),
    }
    for (path, first, last), tokens in positions.items():
        assert (
            f"{path}:{first}" in agreement.__doc__.replace("\n", " ")
            or f"{path.split('/')[-1]}:{first}" in agreement.__doc__
        )
        lines = "\n".join(code[path].splitlines()[first - 1 : last])
        assert all(t in lines for t in tokens), (path, first, last)


def test_transformers_folds_rope_scaling_before_rope_parameters_and_keeps_the_top_level_share(release):
    """The dict SGLang's classes read is transformers' rope_parameters, built from rope_scaling first;
    partial_rotary_factor is read with kwargs.get, so the top-level name stays an attribute (what SGLang
    reads), while one inside the dict alone never becomes one."""
    r, _, pinned = release
    assert f"transformers=={pinned}" in r["rope"]["dicts_from"]
    with zipfile.ZipFile(_wheel("transformers", pinned, "transformers-wheels")) as z:
        tree = ast.parse(z.read("transformers/modeling_rope_utils.py").decode())
    fn = _function(tree, "RotaryEmbeddingConfigMixin", "convert_rope_params_to_dict")
    body = [ast.unparse(s) for s in fn.body]
    assert "self.rope_parameters = rope_scaling or self.rope_parameters" in body
    assert r["rope"]["dicts"] == ["rope_scaling", "rope_parameters"]
    source = ast.unparse(fn)
    assert "kwargs.get('partial_rotary_factor'" in source and "kwargs.pop('partial_rotary_factor'" not in source
    standardize = _function(tree, "RotaryEmbeddingConfigMixin", "standardize_rope_params")
    lists = [
        [e.value for e in n.comparators[0].elts]
        for n in ast.walk(standardize)
        if isinstance(n, ast.Compare) and isinstance(n.ops[0], ast.In) and isinstance(n.comparators[0], ast.List)
    ]
    assert lists and all(types == r["rope"]["original_max_types"] for types in lists)
