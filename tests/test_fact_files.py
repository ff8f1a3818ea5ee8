"""specreg/vllm/facts/<X.Y>/<kind>.json: one folder per vLLM release, every file written by
`fact_files.write_facts` (one fact per line), read by the loaders and packaged in the wheel."""

from __future__ import annotations

import difflib
import json
import tomllib
from pathlib import Path, PurePosixPath

import pytest

from specreg.vllm import attention, deployment, fact_files, kv_cache

ROOT = Path(__file__).resolve().parents[1]
FACTS = ROOT / "specreg" / "vllm" / "facts"
KINDS = ("attention_backends", "kv_cache", "quantization_methods")
FILES = sorted(FACTS.glob("*/*.json"))

#: a few answers per release, as the wheels computed them (the conformance tier holds the files to the
#: wheels): whether it requires flashinfer-cubin, its first pick for a non-causal layer on sm_100,
#: whether FLASH_ATTN's pages are block-first, and how many quantization methods
#: get_quantization_config knows with a fixed minimum capability. History points: a release refreshed
#: after these needs no row here (the folder checks below take the releases from specreg.facts)
STABLE = {
    "0.24": (True, "FLASHINFER", True, 26),
    "0.25": (True, "FLASHINFER", True, 26),
    "0.26": (False, "FLASH_ATTN", True, 26),
    "0.27": (False, "FLASH_ATTN", True, 26),
    "0.28": (False, "FLASH_ATTN", True, 25),
    "0.29": (False, "FLASH_ATTN", False, 25),
    "0.30": (False, "FLASH_ATTN", False, 24),
    "0.31": (False, "FLASH_ATTN", False, 24),
    "0.32": (False, "FLASH_ATTN", False, 24),
    "0.33": (False, "FLASH_ATTN", False, 24),
}


@pytest.mark.parametrize("path", FILES, ids=[p.relative_to(FACTS).as_posix() for p in FILES])
def test_every_committed_facts_file_is_what_write_facts_writes(path):
    data = path.read_bytes()
    assert data == fact_files.facts_text(json.loads(data)).encode(), (
        f"{path.relative_to(ROOT)} was edited by hand: regenerate it (its _about says how)"
    )


def surveyed() -> list[str]:
    """The known releases from the first whose attention, KV-cache and quantization facts were read
    (0.24: the selector's range starts there), newest included."""
    from specreg import facts

    known = facts.known()
    return list(known[known.index(next(iter(STABLE))) :])


def test_every_release_folder_holds_the_three_kinds_with_their_about():
    assert {p.parent.name for p in FILES if p.name != "rules.json"} == set(surveyed())
    for kind in KINDS:
        assert fact_files.releases(kind) == surveyed()
        for release in surveyed():
            about = json.loads((FACTS / release / f"{kind}.json").read_text())["_about"]
            assert "SPECREG_REGENERATE=1" in about and "do not edit" in about


def test_every_known_release_has_its_rules_written_by_their_extractor():
    from specreg import facts

    assert fact_files.releases("rules") == list(facts.known())
    for release in facts.known():
        about = json.loads((FACTS / release / "rules.json").read_text())["_about"]
        assert "tests/conformance/rule_facts.py" in about and "do not edit" in about


def test_the_loaders_read_each_release_from_its_folder():
    assert attention.versions() == surveyed()
    assert list(kv_cache.facts()) == list(deployment._quantization_methods()) == surveyed()
    for release, (cubins, sm100, block_first, methods) in STABLE.items():
        assert "_about" not in attention._facts()[release]
        assert attention.cubins_by_default(release) is cubins
        assert attention._facts()[release]["10.0"]["priorities"]["non-causal|auto"][0] == sm100
        assert kv_cache.facts()[release]["block_first"]["FLASH_ATTN"] is block_first
        assert len(deployment._quantization_methods()[release]) == methods
        assert deployment._quantization_methods()[release]["fp8"] == {
            "act_dtypes": ["bfloat16", "float16"],
            "class": "Fp8Config",
            "min_capability": 75,
        }
        assert fact_files.read_facts(release, "kv_cache") == kv_cache.facts()[release]


def test_write_facts_opens_objects_one_key_per_line_and_keeps_lists_on_one():
    assert fact_files.facts_text({"b": {"heads": [[8, 512]], "ok": True, "none": {}}, "a": "x"}) == (
        '{\n "a": "x",\n "b": {\n  "heads": [[8, 512]],\n  "none": {},\n  "ok": true\n }\n}\n'
    )


def test_a_changed_fact_is_one_changed_line():
    facts = json.loads((FACTS / next(iter(STABLE)) / "attention_backends.json").read_text())
    before = fact_files.facts_text(facts).splitlines()
    facts["9.0"]["backends"]["FLASH_ATTN"]["heads"] = [[8, 576]]
    after = fact_files.facts_text(facts).splitlines()
    changed = [ln for ln in difflib.unified_diff(before, after, lineterm="", n=0) if ln[:1] in "+-"][2:]
    assert changed == ['-    "heads": [[8, 512]],', '+    "heads": [[8, 576]],']


def test_the_regenerate_paths_write_one_file_per_release(tmp_path):
    from tests.conformance import quantization_methods, rule_facts, selector, test_kv_cache_groups

    plain = {"9.0": {"backends": {"FLASH_ATTN": {"sink": False}}}, "cubins_required": None}
    cubins = {"9.0": {"backends": {"FLASH_ATTN": {"sink": True}}}}
    selector.regenerate(
        {"0.99": {"plain": {"facts": plain}, "cubins": {"facts": cubins}, "cubins_required": True}}, tmp_path
    )
    test_kv_cache_groups.regenerate({"0.99": {"facts": {"FLASH_ATTN": True}}}, tmp_path)
    quantization_methods.regenerate({"0.99": {"fp8": {"class": "Fp8Config"}}}, tmp_path)
    rule_facts.regenerate({"0.99": {"spec_flags": True, "kv_mamba_pads": rule_facts.NOT_SURVEYED}}, tmp_path)
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.json")) == sorted(
        f"0.99/{kind}.json" for kind in (*KINDS, "rules")
    )
    rules = json.loads((tmp_path / "0.99" / "rules.json").read_text())
    assert rules == {
        "_about": rule_facts.ABOUT,
        "rules": {"kv_mamba_pads": rule_facts.NOT_SURVEYED, "spec_flags": True},
    }
    written = {kind: json.loads((tmp_path / "0.99" / f"{kind}.json").read_text()) for kind in KINDS}
    assert {k: v for k, v in written["attention_backends"].items() if k != "_about"} == {
        "9.0": {"backends": {"FLASH_ATTN": {"sink": False}}},
        "cubins": cubins,
        "cubins_required": True,
    }
    assert written["kv_cache"]["block_first"] == {"FLASH_ATTN": True}
    assert written["quantization_methods"]["fp8"] == {"class": "Fp8Config"}
    for kind in KINDS:
        text = (tmp_path / "0.99" / f"{kind}.json").read_text()
        assert text == fact_files.facts_text(written[kind]) and "do not edit" in written[kind]["_about"]


def test_the_wheel_carries_every_facts_file():
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["specreg.vllm"]
    package = ROOT / "specreg" / "vllm"
    for path in FACTS.rglob("*"):
        if path.is_file():
            relative = PurePosixPath(path.relative_to(package).as_posix())
            assert any(len(relative.parts) == len(PurePosixPath(g).parts) and relative.match(g) for g in globs), (
                relative
            )
