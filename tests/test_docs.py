"""Docs that list code are generated from it; they fail here when they drift."""

import re

import pytest
from pathlib import Path

from specreg import docs
from specreg.normalization.findings import CODES

ROOT = Path(__file__).resolve().parent.parent


def test_generated_pages_are_up_to_date():
    for name, make in docs.PAGES.items():
        assert (ROOT / "docs" / name).read_text() == make(), f"docs/{name} is stale: run python -m specreg.docs"


def test_every_finding_code_used_in_the_code_is_documented():
    used = set()
    for path in list((ROOT / "specreg").rglob("*.py")) + list((ROOT / "algos").glob("*.py")):
        used |= set(re.findall(r'(?:find|Finding\.of|_note)\(\s*"([a-z0-9-]+)"', path.read_text()))
    assert used, "the probe found no finding codes at all"
    assert used <= set(CODES)
    assert set(CODES) - used == set(), f"documented but never raised: {set(CODES) - used}"


def test_readme_commands_name_files_that_exist():
    readme = (ROOT / "README.md").read_text()
    assert "specreg show examples/qwen3-8b-dflash" in readme
    assert (ROOT / "examples" / "qwen3-8b-dflash" / "config.json").exists()


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    test_line = [l.strip() for l in readme.splitlines() if "pytest" in l and l.startswith("    ")][0]
    assert test_line in ci


COMMANDS_MARK = "<!-- commands: run by tests/test_docs.py -->"


def readme_commands():
    text = (ROOT / "README.md").read_text()
    block = text.split(COMMANDS_MARK, 1)[1].split("```", 2)[1]
    out = []
    for line in block.strip().splitlines():
        command, _, comment = line.partition("#")
        out.append((command.strip(), int(comment.strip().split(":")[0].split()[0])))
    return out


SUBCOMMANDS = {"show", "serve", "materialize", "convert", "check", "algorithms", "verify", "report", "catalog"}


def test_every_specreg_command_the_docs_mention_is_run_by_the_commands_test():
    run_ = {" ".join(c.split()[1:3]) for c, _ in readme_commands()} | {c.split()[1] for c, _ in readme_commands()}
    mentioned = set()
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for m in re.finditer(r"`specreg ([a-z][a-z-]*)(?: ([a-z][a-z-]*))?", path.read_text()):
            sub, sub2 = m.group(1), m.group(2)
            if sub in SUBCOMMANDS:
                mentioned.add(f"{sub} {sub2}" if sub == "catalog" and sub2 else sub)
    assert mentioned <= run_, f"commands the docs show but the commands test never runs: {mentioned - run_}"


@pytest.mark.parametrize(("command", "code"), readme_commands(), ids=[c for c, _ in readme_commands()])
def test_a_readme_command_gives_its_documented_exit_status(hub, tmp_path, command, code):
    import json
    import os
    import shlex
    import shutil
    import subprocess
    import sys

    config = (ROOT / "examples" / "qwen3-8b-dflash" / "config.json").read_bytes()
    hub.add("RedHatAI/Qwen3-8B-speculator.dflash", {"config.json": config})
    hub.add("Qwen/Qwen3-8B", {"config.json": json.dumps({  # the verifier `check` reads
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 4096, "num_hidden_layers": 36,
        "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 151936}).encode()})
    shutil.copytree(ROOT / "registry", tmp_path / "my-catalog")
    for name in ("examples", "tests"):
        (tmp_path / name).symlink_to(ROOT / name)
    argv = shlex.split(command)
    out = subprocess.run([sys.executable, "-m", "specreg", *argv[1:]], capture_output=True, text=True, timeout=120,
                         cwd=tmp_path, env={**os.environ, "SPECREG_REGISTRY": str(ROOT / "registry")})
    assert out.returncode == code, (out.stdout[-1500:], out.stderr[-1500:])
    if code == 2:
        assert len(out.stderr.strip().splitlines()) >= 1 and out.stderr.strip().splitlines()[-1].startswith("error: ")
    if "--json" in argv and code == 0:
        json.loads(out.stdout)
