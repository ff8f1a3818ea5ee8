"""`import specreg` stays light: no torch, transformers, vllm or huggingface_hub."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

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


# -- the first command: what `specreg show`, `check` and `serve --config-only` must not import ---------

DATA = Path(__file__).parent / "data"
#: imported by no command that reads a local draft and prints: each was once imported by every command
#: (issue 48: the other command groups, the catalog, the directory writer, huggingface_hub for its
#: progress bars, importlib.resources and its zipfile/tempfile to list algos/, logging)
NOT_FOR_A_LOCAL_DRAFT = [
    *HEAVY,
    "specreg.cli.catalog",
    "specreg.cli.verify",
    "specreg.verify",
    "specreg.entries",
    "logging",
    "importlib.resources",
    "importlib.metadata",
    "zipfile",
    "tempfile",
]
#: `show` writes nothing and serves nothing
NOT_FOR_SHOW = [*NOT_FOR_A_LOCAL_DRAFT, "specreg.cli.serve", "specreg.api.serve", "specreg.vllm", "specreg.dirwrite"]


def command_modules(tmp_path: Path, *argv: str) -> tuple[set[str], bool]:
    """(the modules loaded, whether tokenize's pattern was compiled) after `specreg ARGV` ran in a
    fresh interpreter on a copy of the dflash fixture, with a local verifier (DRAFT, VERIFIER and OUT
    in argv are replaced by their paths)."""
    draft, verifier = tmp_path / "draft", tmp_path / "verifier"
    draft.mkdir()
    verifier.mkdir()
    (draft / "config.json").write_bytes((DATA / "speculators" / "dflash.json").read_bytes())
    (verifier / "config.json").write_text(json.dumps({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3"}))
    paths = {"DRAFT": draft, "VERIFIER": verifier, "OUT": tmp_path / "out"}
    args = [str(paths.get(a, a)) for a in argv]
    code = (
        "import contextlib, io, sys, tokenize\n"
        "from specreg.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
        f"    rc = main({args!r})\n"
        "print(rc, tokenize._compile.cache_info().currsize, ' '.join(sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    rc, compiled, *modules = out.stdout.split()
    assert rc in ("0", "1"), out.stderr
    return set(modules), compiled != "0"


def loaded(modules: set[str], names: list[str]) -> list[str]:
    return sorted(m for m in modules if any(m == n or m.startswith(n + ".") for n in names))


@pytest.mark.parametrize(
    "argv, not_imported",
    [
        (("show", "DRAFT", "--json"), NOT_FOR_SHOW),
        (("show", "DRAFT"), NOT_FOR_SHOW),
        (("check", "DRAFT", "--verifier", "VERIFIER", "--no-weights", "--json"), NOT_FOR_A_LOCAL_DRAFT),
        (("serve", "DRAFT", "--verifier", "VERIFIER", "--config-only", "--dir", "OUT"), NOT_FOR_A_LOCAL_DRAFT),
    ],
    ids=["show --json", "show", "check", "serve --config-only"],
)
def test_the_first_command_imports_only_what_it_runs(tmp_path, argv, not_imported):
    modules, tokenized = command_modules(tmp_path, *argv)
    assert "specreg.normalization.core" in modules  # the probe ran the command
    assert loaded(modules, not_imported) == []
    # a builtin as an attrs converter (converter=tuple) makes attrs parse its text signature with
    # tokenize, whose first use compiles a pattern costing a fifth of a short command
    assert not tokenized


def test_the_first_command_probe_sees_what_a_command_imports(tmp_path):
    # the same probe sees the catalog and the writer where a command does use them: the test above can fail
    modules, _ = command_modules(tmp_path, "catalog", "list", "--json")
    assert loaded(modules, ["specreg.entries"]) and not loaded(modules, ["specreg.dirwrite"])
