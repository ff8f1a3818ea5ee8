"""Every command's `--json` answer for every config under tests/data, recorded.

The answers users script against (`show`, `check`, `check --gpu`, `serve --config-only`) must not move
when code moves. `tests/test_cli_outputs.py` compares each fixture's answers with the record in
`tests/data/cli_outputs.json.gz`; a change meant to alter an answer re-records it and the diff is read
in review:

    .venv/bin/python tests/cli_outputs.py --record      # rewrite the record from this checkout
    .venv/bin/python tests/cli_outputs.py --diff OTHER.json.gz   # what differs from another record

Each case is `[exit code, stdout, stderr]` with the temporary paths replaced by DRAFT / SERVEDIR and the
checkout by ROOT. The record is gzip'd JSON (8 MB of text, 0.2 MB stored).
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _newest() -> str:
    sys.path.insert(0, str(ROOT))
    from specreg import facts

    return facts.known()[-1]


DATA = ROOT / "tests" / "data"
RECORD = DATA / "cli_outputs.json.gz"
#: the vLLM versions each fixture is answered for: two fixed points of history (the oldest the plugin
#: was tested on, one between) and the newest known release, which a new release moves: absorbing one
#: is `--record` and a read of the diff, as for any change meant to alter an answer
VERSIONS = ("0.26", "0.30", _newest())
#: the verifier every fixture is checked against: Qwen/Qwen3-8B's config.json (most fixtures are its
#: drafts; the others get the mismatch findings a wrong verifier gets, which are answers too)
VERIFIER = {
    "architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3",
    "hidden_size": 4096,
    "intermediate_size": 12288,
    "num_hidden_layers": 36,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "vocab_size": 151936,
    "max_position_embeddings": 40960,
    "rope_theta": 1000000,
    "rms_norm_eps": 1e-06,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}


def fixtures() -> list[str]:
    """The configs, relative to tests/data, sorted."""
    found = (p for p in DATA.rglob("*.json") if p.name != "README.json" and "trained" not in p.parts)
    return sorted(str(p.relative_to(DATA)) for p in found)


def _run(argv: list[str]) -> list:
    from specreg.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as exc:
            rc = exc.code
    return [rc, out.getvalue(), err.getvalue()]


def answers(fixture: str) -> dict[str, list]:
    """{case: [rc, stdout, stderr]} for one fixture (a path relative to tests/data)."""
    work = Path(tempfile.mkdtemp(prefix="specreg-outputs-"))
    try:
        draft, served, verifier = work / "draft", work / "served", work / "verifier"
        draft.mkdir()
        verifier.mkdir()
        shutil.copy(DATA / fixture, draft / "config.json")
        (verifier / "config.json").write_text(json.dumps(VERIFIER))
        common = ["--json", "--verifier", str(verifier)]
        cases = {}
        for v in VERSIONS:
            cases[f"show {fixture} {v}"] = _run(["show", str(draft), *common, "--vllm", v])
            check = ["check", str(draft), *common, "--no-weights", "--vllm", v]
            cases[f"check {fixture} {v}"] = _run(check)
            cases[f"check-gpu {fixture} {v}"] = _run([*check, "--gpu", "H100"])
        serve = ["serve", str(draft), *common, "--config-only", "--dir", str(served), "--force"]
        cases[f"serve {fixture}"] = _run(serve)

        def scrub(text: str) -> str:
            for path, name in ((served, "SERVEDIR"), (draft, "DRAFT"), (verifier, "VERIFIER"), (ROOT, "ROOT")):
                text = text.replace(str(path), name)
            return text

        return {k: [rc, scrub(o), scrub(e)] for k, (rc, o, e) in cases.items()}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def read(path: Path = RECORD) -> dict[str, list]:
    return json.loads(gzip.decompress(path.read_bytes()))


def record_all() -> dict[str, list]:
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["SPECREG_CACHE"] = tempfile.mkdtemp(prefix="specreg-outputs-cache-")
    every: dict[str, list] = {}
    for i, fixture in enumerate(fixtures(), 1):
        print(f"[{i}/{len(fixtures())}] {fixture}", file=sys.stderr)
        every.update(answers(fixture))
    return every


def differences(old: dict[str, list], new: dict[str, list]) -> list[str]:
    """One paragraph per case that differs, added or went missing."""
    lines = []
    for case in sorted(old.keys() | new.keys()):
        if case not in new:
            lines.append(f"- {case}: no longer answered")
        elif case not in old:
            lines.append(f"+ {case}: new")
        elif old[case] != new[case]:
            import difflib

            for part, a, b in zip(("rc", "stdout", "stderr"), old[case], new[case]):
                if a != b:
                    delta = difflib.unified_diff(str(a).splitlines(), str(b).splitlines(), lineterm="", n=1)
                    lines.append(f"~ {case} ({part}):\n" + "\n".join(list(delta)[2:]))
    return lines


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    if sys.argv[1:] == ["--record"]:
        data = json.dumps(record_all(), indent=0, sort_keys=True).encode()
        RECORD.write_bytes(gzip.compress(data, mtime=0))
        print(f"wrote {RECORD.relative_to(ROOT)} ({len(data):,} bytes of JSON)")
    elif len(sys.argv) == 3 and sys.argv[1] == "--diff":
        print("\n".join(differences(read(Path(sys.argv[2])), read())) or "no differences")
    else:
        sys.exit(__doc__)
