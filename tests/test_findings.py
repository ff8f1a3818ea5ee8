"""The finding codes: every code whose fix is known carries it, and the ones that carry none say why."""

import ast
from pathlib import Path

import specreg
from specreg.normalization.findings import CODES, NO_FIX, SERVED_DIFFERENTLY
from specreg.normalization.speculator import Finding

ROOT = Path(__file__).parent.parent
BUILT_IN = {c for c in CODES if "/" not in c}


def emitted_with_a_fix() -> set[str]:
    """Codes some call in specreg's code emits with a fix (a `fix=` keyword or a fourth argument)."""
    found = set()
    files = [*(ROOT / "specreg").rglob("*.py"), *(ROOT / "algos").rglob("*.py")]
    for path in files:
        if path.name == "findings.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)):
                continue
            if node.args[0].value in BUILT_IN and (len(node.args) >= 4 or any(k.arg == "fix" for k in node.keywords)):
                found.add(node.args[0].value)
    return found


def test_every_code_has_a_fix_or_a_reason_for_none():
    with_fix = emitted_with_a_fix() | {c for c in BUILT_IN if CODES[c].fix}
    missing = sorted(BUILT_IN - with_fix - set(NO_FIX))
    assert not missing, f"give these codes a fix, or add them to findings.NO_FIX with the reason: {missing}"


def test_no_code_is_both_fixed_and_listed_as_having_no_fix():
    with_fix = emitted_with_a_fix() | {c for c in BUILT_IN if CODES[c].fix}
    assert not (with_fix & set(NO_FIX))
    assert set(NO_FIX) <= BUILT_IN


def test_the_codes_with_no_fix_and_why():
    assert all(isinstance(why, str) and why.strip() for why in NO_FIX.values())
    # the two issue 40 named: their fixes are known, so they carry them
    assert "served-causal-mismatch" not in NO_FIX and "needs-v2-model-runner" not in NO_FIX


def test_a_served_differently_finding_says_how_to_serve_the_draft_as_trained():
    for code in SERVED_DIFFERENTLY - {"config-byte-order-mark"}:
        fix = Finding.of(code, "m").fix
        assert "specreg serve DRAFT" in fix and "specreg materialize DRAFT DIR" in fix, code


def test_an_emitters_own_fix_wins_over_the_codes():
    assert Finding.of("served-causal-mismatch", "m", fix="do this").fix == "do this"


def test_the_example_dflash_mismatch_carries_the_fix():
    spec = specreg.load(str(ROOT / "examples" / "qwen3-8b-dflash"), vllm="0.33")
    found = [f for f in spec.findings if f.code == "served-causal-mismatch"]
    assert [f.fix for f in found] == [CODES["served-causal-mismatch"].fix]


def test_a_v2_only_draft_says_how_to_start_vllm():
    config = __import__("json").loads((ROOT / "tests/data/speculators/dspark_generated.json").read_text())
    spec = specreg.normalize(config, vllm="0.33")
    found = [f for f in spec.findings if f.code == "needs-v2-model-runner"]
    assert found and "VLLM_USE_V2_MODEL_RUNNER=1" in found[0].fix
    assert spec.serve_env == {"VLLM_USE_V2_MODEL_RUNNER": "1"}  # the same spelling serve sets
