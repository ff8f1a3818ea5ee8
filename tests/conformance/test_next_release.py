"""Ready for the next vLLM release (issue 58 part 4): wheels built from the newest known one with an open
pull request's change applied, read by the refresh's own rule extractors (rule_facts.compute).

- vLLM PR #56692 rewrites `update_dflash` so that `sliding_window_non_causal: false` sets no global
  causal flag (sliding layers causal by their type, full layers non-causal, as speculators trains): the
  extractors compute `dflash_causal_false_keeps_full_non_causal`, `facts diff` names it, and
  `served-causal-mismatch` (with the corrected copy `serve` writes) goes for that release only.
- vLLM PR #54654 moved `config/speculative.py` and `transformers_utils/configs/speculators/` into a new
  package and left `sys.modules` shims at the old paths: the extractors follow each shim to its new home
  (every rule as the unmoved wheel has it), and a shim whose home is missing fails loudly.
"""

from __future__ import annotations

import ast

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.version import Version

import specreg
from conftest import fixture_config
from specreg import facts
from specreg.facts import diff as facts_diff
from tests.conformance import rule_facts

pytestmark = pytest.mark.conformance

ALGOS = "vllm/transformers_utils/configs/speculators/algos.py"
#: update_dflash's global mapping as the newest known wheel has it, and PR #56692's per-layer body
GLOBAL = """    pre_trained_config["dflash_config"]["causal"] = not config_dict.get(
        "sliding_window_non_causal", True
    )
"""
PER_LAYER = """    # speculators trains full attention bidirectional; the flag decides the sliding layers, which their
    # layer type already makes causal: only true (or absent) overrides every layer (vLLM PR #56692)
    if config_dict.get("sliding_window_non_causal", True):
        pre_trained_config["dflash_config"]["causal"] = False
"""


def next_release() -> tuple[str, str]:
    """(release, wheel) one minor past the newest known: the version the built wheels carry."""
    newest = Version(facts.known()[-1])
    release = f"{newest.major}.{newest.minor + 1}"
    return release, f"{release}.0"


def build(base: Path, out: Path, version: str, files: dict[str, str | None]) -> Path:
    """A copy of the wheel `base` as vLLM `version`, `files` replaced (None: deleted); `zip` rewrites
    only those entries (the rest are copied as they are compressed)."""
    target = out / f"vllm-{version}-cp38-abi3-manylinux_2_28_x86_64.whl"
    shutil.copyfile(base, target)
    gone = [name for name, text in files.items() if text is None or name]
    if gone:
        subprocess.run(["zip", "-q", "-d", str(target), *gone], check=False)  # an absent entry is fine
    staged = out / "staged"
    for name, text in files.items():
        if text is not None:
            (staged / name).parent.mkdir(parents=True, exist_ok=True)
            (staged / name).write_text(text)
    added = [name for name, text in files.items() if text is not None]
    if added:
        subprocess.run(["zip", "-q", str(target), *added], cwd=staged, check=True)
    shutil.rmtree(staged, ignore_errors=True)
    return target


@pytest.fixture
def wheels(tmp_path, monkeypatch):
    """A wheel cache of its own (the built wheels never meet the real cache's), every extractor's module
    pointed at it; the newest known wheel found (or fetched) in the real cache first."""
    newest_wheel()
    cache = tmp_path / "wheels"
    cache.mkdir()
    for name, module in list(sys.modules.items()):
        if name.endswith("vllm_mapping"):
            monkeypatch.setattr(module, "CACHE", cache)
            module.mapping.cache_clear()
    yield cache
    for name, module in list(sys.modules.items()):
        if name.endswith("vllm_mapping"):
            module.mapping.cache_clear()


_NEWEST: list[Path] = []


def newest_wheel() -> Path:
    """The newest known release's wheel in the real cache (read before a test points the cache away)."""
    if not _NEWEST:
        from tests.conformance.vllm_mapping import wheel

        _NEWEST.append(wheel(facts.wheel(facts.known()[-1])))
    return _NEWEST[0]


def computed(version: str) -> dict:
    return rule_facts.compute(version, None)  # the refresh's rules step (no kv_cache survey here)


def test_update_dflash_per_layer_is_the_new_rule_and_the_mismatch_goes_for_that_release_only(
    wheels, tmp_path, monkeypatch
):
    release, version = next_release()
    base = newest_wheel()
    with zipfile.ZipFile(base) as z:
        algos = z.read(ALGOS).decode()
    assert GLOBAL in algos, "the newest wheel's update_dflash changed: rewrite GLOBAL from it"
    build(base, wheels, version, {ALGOS: algos.replace(GLOBAL, PER_LAYER)})

    rules = computed(version)
    newest = facts.release_rules(facts.known()[-1])
    assert rules["dflash_causal_false_keeps_full_non_causal"] is True
    assert newest["dflash_causal_false_keeps_full_non_causal"] is False
    same = {r: v for r, v in rules.items() if isinstance(v, bool) and r != "dflash_causal_false_keeps_full_non_causal"}
    assert same == {r: newest[r] for r in same}  # nothing else moved

    # the release as refresh writes it, in a copy of the committed facts
    folder = tmp_path / "facts"
    shutil.copytree(facts.FOLDER, folder)
    rule_facts.regenerate({release: rules}, folder, {release: rule_facts.refusals(version)})
    listed = json.loads((folder / "releases.json").read_text())
    listed["releases"].append({"plugin_tested": False, "release": release, "tested_by": [], "wheel": version})
    (folder / "releases.json").write_text(json.dumps(listed))
    monkeypatch.setattr(facts, "FOLDER", folder)
    facts.reread()
    try:
        monkeypatch.setattr(facts_diff.facts, "FOLDER", folder)
        lines = facts_diff.diff(facts.known()[-2], release, facts_diff.read_committed, facts.metadata())
        moved = [
            line for line in lines if line.endswith(")") and (" now holds " in line or " no longer holds " in line)
        ]
        assert [line.split(" ")[1:4] for line in moved] == [
            ["dflash_causal_false_keeps_full_non_causal", "now", "holds"]
        ]
        assert lines[0].startswith("rules: ")  # rule changes first

        config = fixture_config("dflash")  # sliding_window_non_causal false, full-attention layers
        assert config["sliding_window_non_causal"] is False
        draft = tmp_path / "draft"
        draft.mkdir()
        (draft / "config.json").write_text(json.dumps(config))
        before = specreg.load(draft, vllm=facts.known()[-2])
        after = specreg.load(draft, vllm=version)
        assert "served-causal-mismatch" in [f.code for f in before.findings]
        assert before.materialize_reason is not None
        assert "served-causal-mismatch" not in [f.code for f in after.findings]
        assert after.materialize_reason is None  # serve names the unmodified file: no corrected copy
    finally:
        monkeypatch.undo()
        facts.reread()


#: PR #54654's move: the old path -> the new one
MOVES = {
    "vllm/config/speculative.py": "vllm/speculative/config.py",
    "vllm/transformers_utils/configs/speculators/": "vllm/speculative/speculators/",
}


def shim(module: str) -> str:
    return (
        "import importlib\nimport sys\n\n"
        f'sys.modules[__name__] = importlib.import_module("{module}")  # moved (vLLM PR #54654)\n'
    )


def moved_files(base: Path, keep_home: bool = True) -> dict[str, str | None]:
    files: dict[str, str | None] = {}
    with zipfile.ZipFile(base) as z:
        names = z.namelist()
        for old, new in MOVES.items():
            for name in [n for n in names if n == old or (old.endswith("/") and n.startswith(old))]:
                files[name] = None
                if keep_home:
                    files[new + name[len(old) :] if old.endswith("/") else new] = z.read(name).decode()
    files["vllm/speculative/__init__.py"] = ""
    files["vllm/config/speculative.py"] = shim("vllm.speculative.config")
    files["vllm/transformers_utils/configs/speculators/__init__.py"] = shim("vllm.speculative.speculators")
    return files


def test_a_module_moved_behind_a_sys_modules_shim_is_followed_to_its_new_home(wheels):
    release, version = next_release()
    base = newest_wheel()
    build(base, wheels, version, moved_files(base))
    newest = facts.release_rules(facts.known()[-1])
    rules = computed(version)
    decided = {r: v for r, v in rules.items() if isinstance(v, bool)}  # all but the kv_cache survey's
    assert len(decided) == len(rule_facts.HOLDS)
    assert decided == {r: newest[r] for r in decided}
    assert rule_facts.refusals(version) == facts.refused(facts.known()[-1])
    # the module readers of the other fact kinds read the same new home through the shim
    from conformance.quantization_methods import Wheel

    tree = Wheel(version).tree("vllm.config.speculative")
    assert tree is not None and "SpeculativeConfig" in {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}


def test_a_shim_whose_new_home_is_missing_fails_the_extractors_loudly(wheels):
    from conformance.vllm_mapping import MovedModuleError

    release, version = next_release()
    base = newest_wheel()
    build(base, wheels, version, moved_files(base, keep_home=False))
    with pytest.raises(MovedModuleError, match="replaces itself in sys.modules"):
        computed(version)
