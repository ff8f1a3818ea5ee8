"""`specreg completion bash|zsh`: a script written from the parser, completing commands, options, finding
codes and catalog ids (run here in a real bash)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

import specreg
from conftest import run_in_process


def complete(script: str, *words: str) -> list[str]:
    """What bash offers for the last of `words` after `specreg`, with the script loaded."""
    line = " ".join(f"'{w}'" for w in ("specreg", *words))
    program = f'{script}\nCOMP_WORDS=({line}); COMP_CWORD={len(words)}; _specreg; printf "%s\\n" "${{COMPREPLY[@]}}"'
    out = subprocess.run(["bash", "--norc", "-c", program], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


@pytest.fixture(scope="module")
def bash_script():
    if shutil.which("bash") is None:
        pytest.skip("no bash on this machine")
    r = run_in_process("completion", "bash")
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_commands_complete(bash_script):
    assert complete(bash_script, "ex") == ["explain"]
    assert sorted(complete(bash_script, "ca")) == ["cache", "catalog"]


def test_options_come_from_the_parser(bash_script):
    assert complete(bash_script, "check", "/tmp/d", "--no-w") == ["--no-weights"]
    assert complete(bash_script, "catalog", "list", "--alg") == ["--algorithm"]
    assert complete(bash_script, "cache", "clean", "--y") == ["--yes"]


def test_finding_codes_and_catalog_ids_complete(bash_script):
    assert complete(bash_script, "explain", "served-causal-m") == ["served-causal-mismatch"]
    ids = [e.id for e in specreg.catalog().values() if e.id.startswith("RedHatAI/Qwen3-8B-speculator.d")]
    assert complete(bash_script, "catalog", "show", "RedHatAI/Qwen3-8B-speculator.d") == ids
    assert complete(bash_script, "verify", "RedHatAI/Qwen3-8B-speculator.d") == ids


def test_the_zsh_script_loads_the_same_functions_through_bashcompinit(bash_script):
    r = run_in_process("completion", "zsh")
    assert r.stdout.startswith("#compdef specreg\n")
    assert "autoload -U +X bashcompinit && bashcompinit\n" in r.stdout
    assert r.stdout.endswith(bash_script.split("\n", 1)[1])


def test_a_shell_not_known_is_a_usage_error():
    r = run_in_process("completion", "fish")
    assert r.returncode == 2 and "invalid choice: 'fish'" in r.stderr
