"""`specreg completion bash|zsh`: a script written from the parser, completing commands, options, finding
codes and catalog ids (run here in a real bash)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

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


#: drives an interactive zsh (zsh -f -i) through its zpty module: loads compinit and the script, types the
#: words, a TAB and ^X, which a widget binds to print the line as it became (zsh's own completion system,
#: widgets and all; zle runs the keys in order, so the line is printed once the completion is done)
ZPTY_DRIVER = r"""
zmodload zsh/zpty
zpty z 'zsh -f -i'
zpty -w z "PS1='>'; PATH=$1:\$PATH; autoload -U compinit && compinit -u; source $2; show-line() { print -rn -- B''UF:\$BUFFER:E''ND }; zle -N show-line; bindkey '^X' show-line; print RE''ADY"
out=''
for i in {1..400}; do zpty -r -t z chunk && out+=$chunk; [[ $out == *READY* ]] && break; sleep 0.02; done
zpty -n -w z "$3"$'\t\x18'
out=''
for i in {1..1000}; do zpty -r -t z chunk && out+=$chunk; [[ $out == *:END* ]] && break; sleep 0.01; done
zpty -d z
print -r -- "$out"
"""


def zsh_line(script: Path, words: str) -> str:
    """The command line after typing `words` and TAB in zsh with `script` loaded."""
    import re
    import sys

    bin_dir = str(Path(sys.executable).parent)  # the venv's specreg script, as a user's PATH has it
    out = subprocess.run(
        ["zsh", "-f", "-c", ZPTY_DRIVER, "zsh", bin_dir, str(script), words],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    (line,) = re.findall(r"BUF:(.*?):END", out.stdout, re.S)
    return line.strip()


@pytest.fixture(scope="module")
def zsh_script(tmp_path_factory):
    if shutil.which("zsh") is None:
        pytest.skip("no zsh on this machine (Debian: apt-get install zsh; .ci/run installs it)")
    r = run_in_process("completion", "zsh")
    assert r.returncode == 0, r.stderr
    path = tmp_path_factory.mktemp("zsh") / "_specreg"
    path.write_text(r.stdout)
    return path


def test_zsh_completes_commands_codes_and_ids_through_its_own_completion_system(zsh_script):
    assert zsh_line(zsh_script, "specreg expl") == "specreg explain"
    assert zsh_line(zsh_script, "specreg explain served-causal-m") == "specreg explain served-causal-mismatch"
    assert zsh_line(zsh_script, "specreg check /tmp/d --no-w") == "specreg check /tmp/d --no-weights"
    prefix = "RedHatAI/gemma-4-31B-it-speculator.ds"
    (only,) = [e.id for e in specreg.catalog().values() if e.id.startswith(prefix)]  # one match: zsh fills it in
    assert zsh_line(zsh_script, f"specreg verify {prefix}") == f"specreg verify {only}"


def test_the_zsh_script_loads_the_same_functions_through_bashcompinit(bash_script):
    r = run_in_process("completion", "zsh")
    assert r.stdout.startswith("#compdef specreg\n")
    assert "autoload -U +X bashcompinit && bashcompinit\n" in r.stdout
    assert r.stdout.endswith(bash_script.split("\n", 1)[1])


def test_a_shell_not_known_is_a_usage_error():
    r = run_in_process("completion", "fish")
    assert r.returncode == 2 and "invalid choice: 'fish'" in r.stderr
