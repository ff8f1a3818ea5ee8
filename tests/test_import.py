"""`import specreg` stays light: no torch, transformers, vllm or huggingface_hub."""

import subprocess
import sys

HEAVY = ["torch", "transformers", "vllm", "huggingface_hub", "httpx", "httpx2", "numpy", "safetensors"]


def modules_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport sys\nprint('\\n'.join(sys.modules))"],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout
    return set(out.split())


def test_import_specreg_pulls_in_no_heavy_module():
    loaded = modules_after("import specreg")
    assert not {m for m in loaded if m.split(".")[0] in HEAVY}


def test_normalize_pulls_in_no_heavy_module():
    code = (
        "import json, specreg\n"
        "spec = specreg.normalize(json.load(open(%r)))\n" % str(__import__("pathlib").Path(__file__).parent / "data/speculators/dflash.json")
        + "specreg.algorithms()"
    )
    loaded = modules_after(code)
    assert not {m for m in loaded if m.split(".")[0] in HEAVY}


def test_the_check_detects_a_heavy_import():
    # The same probe sees a heavy module when one is imported: the test above can fail.
    assert "huggingface_hub" in modules_after("import specreg.hub, huggingface_hub")
