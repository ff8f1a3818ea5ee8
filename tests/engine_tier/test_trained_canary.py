"""A canary catalog of trained drafts: the nightly's whole path (baseline, harness, engine, judgement)
on real trainer output. Each entry's published baseline is its trainer's AL (trainer.json) with the
harness the trained drafts are measured with (data.py's prompts as raw text for the word-level
tokenizer, greedy, trainer.json's length, k); its tolerance is trained.py's band for the drafts such
a run takes. `specreg verify --all --registry CANARY` on vLLM's engine passes for the trained drafts
and reports `regressed` (exit 1) for the DFlash twin served with its aux layer ids one higher
(test_trained_sensitivity.py: the EAGLE-3 twin stays inside the band).

The drafts are served by the loopback Hub (tests/hub_server.py); their configs name the verifier
"verifier", a folder in the working directory verify runs in.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

import trained
from engines import engine_env, require_engine

pytestmark = pytest.mark.trainer  # its ~3.5 min of engine time would take the engine tier (CI) past its budget

TWIN = "dflash-2l-aux-ids-plus-one"


def entry(name: str, record: dict, prompts: int) -> str:
    al, k, length = record["acceptance_length"], record["num_speculative_tokens"], record["harness"]["max_tokens"]
    # the band of trained.py for the drafts this run should take: each prompt's first token comes from
    # the prefill, each draft then yields AL tokens on average
    drafts = prompts * (length - 1) / al
    tolerance = trained.Z * k / (2 * math.sqrt(drafts)) / al
    return f"""id = "org/{name}"
algorithm = "{record["algorithm"]}"
status = "unpinned"

[verifier]
id = "org/verifier"

[[baselines]]
kind = "published"
source = "speculators 0.9.0's trainer, validation (tests/data/trained/{record["name"]}/trainer.json)"

[baselines.harness]
dataset = "gsm8k"
num_prompts = {prompts}
temperature = 0.0
k = {k}
max_tokens = {length}

[baselines.harness.prompt]
chat_template = false
few_shot = 0

[baselines.metrics.acceptance_length]
value = {al}
direction = "two-sided"
tolerance = {tolerance:.4f}
"""


@pytest.fixture(scope="module")
def canary(tmp_path_factory):
    from hub_server import FakeHub

    require_engine()
    root = tmp_path_factory.mktemp("canary")
    reg = root / "registry" / "org"
    reg.mkdir(parents=True)
    names = trained.drafts()
    repos = {}
    for name in names:
        record = {**trained.record(name), "name": name}
        (reg / f"{name}.toml").write_text(entry(name, record, trained.PROMPTS))
        repos[name] = trained.stage(root, name)
    # the twin: the trained DFlash with its aux layer ids one higher, its baseline the trainer's
    twin = trained.stage(root, "dflash-2l", TWIN)
    config = json.loads((twin / "config.json").read_text())
    config["aux_hidden_state_layer_ids"] = [i + 1 for i in config["aux_hidden_state_layer_ids"]]
    (twin / "config.json").write_text(json.dumps(config, indent=2))
    (reg / f"{TWIN}.toml").write_text(
        entry(TWIN, {**trained.record("dflash-2l"), "name": "dflash-2l"}, trained.PROMPTS)
    )
    repos[TWIN] = twin
    prompts, _ = trained.prompts(names[0])
    rows = root / "gsm8k.jsonl"
    rows.write_text(
        "".join(json.dumps({"question": " ".join(f"t{t}" for t in p), "answer": "#### 0"}) + "\n" for p in prompts)
    )
    with FakeHub() as hub:
        for name, folder in repos.items():
            hub.add(f"org/{name}", {f.name: f.read_bytes() for f in folder.iterdir()})
        env = {
            **engine_env(plugin=True),
            "HF_ENDPOINT": hub.url,
            "HF_HUB_CACHE": str(root / "hf-cache"),
            "HF_HUB_OFFLINE": "0",
            "HF_HUB_DISABLE_IMPLICIT_TOKEN": "1",
        }
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "specreg",
                "verify",
                "--all",
                "--registry",
                str(root / "registry"),
                "--out",
                str(root / "results"),
                "--dataset-file",
                f"gsm8k={rows}",
                "--chunks",
                "1",
            ],
            capture_output=True,
            text=True,
            cwd=root,
            env=env,
            timeout=1500,
        )
    results = {p.parent.name: json.loads(p.read_text()) for p in (root / "results").glob("*/result.json")}
    return done, results, names


def test_verify_all_passes_the_trained_drafts_and_regresses_the_twin(canary):
    done, results, names = canary
    verdicts = {k: r["verdict"] for k, r in results.items()}
    expected = {**{f"org--{n}": "pass" for n in names}, f"org--{TWIN}": "regressed"}
    figures = {k: (r.get("statistics") or {}).get("acceptance_length", r.get("error")) for k, r in results.items()}
    assert verdicts == expected, (figures, done.stdout[-2000:], done.stderr[-3000:])
    assert done.returncode == 1, done.stderr[-2000:]
