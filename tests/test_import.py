"""`import specreg` stays light: no torch, transformers, vllm or huggingface_hub."""

import subprocess
import sys

HEAVY = ["torch", "transformers", "vllm", "huggingface_hub", "httpx", "httpx2", "numpy", "safetensors"]


def modules_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport sys\nprint('\\n'.join(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    return set(out.split())


def test_import_specreg_pulls_in_no_heavy_module():
    loaded = modules_after("import specreg")
    assert not {m for m in loaded if m.split(".")[0] in HEAVY}


def test_normalize_pulls_in_no_heavy_module():
    code = (
        "import json, specreg\n"
        "spec = specreg.normalize(json.load(open(%r)))\n"
        % str(__import__("pathlib").Path(__file__).parent / "data/speculators/dflash.json")
        + "specreg.algorithms()"
    )
    loaded = modules_after(code)
    assert not {m for m in loaded if m.split(".")[0] in HEAVY}


def test_the_check_detects_a_heavy_import():
    # The same probe sees a heavy module when one is imported: the test above can fail.
    assert "huggingface_hub" in modules_after("import specreg.sources.hub, huggingface_hub")


def test_public_names_stay_what_they_are_after_every_submodule_is_imported():
    # A submodule named like a public function would replace it on the package once imported
    # (specreg.normalize was once the module after specreg.load had run).
    import importlib
    import pkgutil
    import types

    import specreg

    for info in pkgutil.iter_modules(specreg.__path__):
        if info.name == "__main__":
            continue
        importlib.import_module(f"specreg.{info.name}")
    for name in specreg.__all__:
        assert not isinstance(getattr(specreg, name), types.ModuleType), name
