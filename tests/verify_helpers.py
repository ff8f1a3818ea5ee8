"""Helpers shared by the verify tests: catalog entries, prompt files and the offline CLI runner."""

import json
from pathlib import Path

import pytest

from conftest import run_in_process
from openai_server import OpenAIServer

REPO_ROOT = Path(__file__).resolve().parent.parent


def run(*args, env=None):
    """The CLI in this process (conftest.run_in_process), offline: these tests check outputs and exit codes."""
    return run_in_process(*args, env={"HF_HUB_OFFLINE": "1", **(env or {})})


def write_rows(path: Path, n=30, category=None):
    with path.open("w") as f:
        for i in range(n):
            row = {"question": f"What is {i} + {i}?", "answer": f"{2 * i}"}
            if category:
                row["category"] = category if i % 2 else "other"
            f.write(json.dumps(row) + "\n")
    return path


ENTRY = """id = "org/draft"
algorithm = "eagle3"
status = "unpinned"

[verifier]
id = "org/verifier"

[[baselines]]
kind = "published"
source = "a test"

[baselines.harness]
dataset = "gsm8k"
num_prompts = 20
temperature = 0.0
k = 3

[baselines.metrics.acceptance_length]
value = 2.8
direction = "two-sided"
tolerance = 0.05

[baselines.metrics.per_position]
values = [0.8, 0.6, 0.4]
"""


def verify_args(server, reg, rows, out, *extra):
    return (
        "verify",
        "org/draft",
        "--server",
        server.url,
        "--dataset",
        "gsm8k",
        "--dataset-file",
        str(rows),
        "--num-prompts",
        "20",
        "--k",
        "3",
        "--out",
        str(out),
        "--registry",
        str(reg),
        *extra,
    )


def invalid_catalog(reg: Path) -> None:
    """Two valid entries (org/a, org/b), one with a string for its baseline AL and one that is not TOML."""
    (reg / "org").mkdir(parents=True)
    for name in ("a", "b"):
        (reg / "org" / f"{name}.toml").write_text(ENTRY.replace("org/draft", f"org/{name}"))
    (reg / "org" / "typed.toml").write_text(
        ENTRY.replace("org/draft", "org/typed").replace("value = 2.8", 'value = "x"')
    )
    (reg / "org" / "broken.toml").write_text("id = [[[")


MT_ENTRY = ENTRY.replace('dataset = "gsm8k"', 'dataset = "mt-bench"')


def mt_rows(path: Path, n=30) -> Path:
    path.write_text(
        "".join(json.dumps({"turns": [f"Write about {i}."], "category": "writing"}) + "\n" for i in range(n))
    )
    return path


@pytest.fixture
def setup(tmp_path):
    reg = tmp_path / "registry"
    (reg / "org").mkdir(parents=True)
    (reg / "org" / "draft.toml").write_text(ENTRY)
    rows = write_rows(tmp_path / "gsm8k.jsonl")
    return reg, rows, tmp_path / "out" / "org--draft"


@pytest.fixture
def mt_setup(tmp_path):
    reg = tmp_path / "registry"
    (reg / "org").mkdir(parents=True)
    (reg / "org" / "draft.toml").write_text(MT_ENTRY)
    return reg, mt_rows(tmp_path / "mt.jsonl"), tmp_path / "out"


#: MT_ENTRY with ENTRY's gsm8k baseline added as baseline 1
TWO_BASELINES = MT_ENTRY + "\n[[baselines]]" + ENTRY.split("\n[[baselines]]", 1)[1]


def two_baseline_report(tmp_path):
    """(registry, site): an MT-Bench pass, an MT-Bench regression, then two gsm8k passes of org/draft
    (TWO_BASELINES), each against the loopback server, and the report over them."""
    reg = tmp_path / "registry"
    (reg / "org").mkdir(parents=True)
    (reg / "org" / "draft.toml").write_text(TWO_BASELINES)
    (reg / "org" / "other.toml").write_text(ENTRY.replace("org/draft", "org/other"))
    mt, gsm = mt_rows(tmp_path / "mt.jsonl"), write_rows(tmp_path / "gsm8k.jsonl")
    out = tmp_path / "results" / "org--draft"
    for rates, baseline, rows in (
        ((0.8, 0.6, 0.4), "0", mt),
        ((0.3, 0.1, 0.05), "0", mt),
        ((0.8, 0.6, 0.4), "1", gsm),
        ((0.8, 0.6, 0.4), "1", gsm),
    ):
        with OpenAIServer(rates=rates) as server:
            r = run(
                "verify",
                "org/draft",
                "--server",
                server.url,
                "--baseline",
                baseline,
                "--dataset-file",
                str(rows),
                "--registry",
                str(reg),
                "--out",
                str(out),
            )
        assert r.returncode in (0, 1), r.stdout + r.stderr
    assert json.loads((out / "result.json").read_text())["verdict"] == "pass"  # the newest run alone says pass
    site = tmp_path / "site"
    r = run("report", str(tmp_path / "results"), "--out", str(site), "--registry", str(reg))
    assert r.returncode == 0, r.stderr
    return reg, site


#: the headline entry: one baseline, a draft acceptance rate of 28.82% at k=8 on MT-Bench (80 prompts)
HEADLINE = "RedHatAI/gemma-4-31B-it-speculator.dflash"
#: per-position rates at k=8 whose accepted tokens are exactly 28.82% of the draft tokens with 1,250
#: drafts per request (750 + 560 + 440 + 350 + 290 + 230 + 162 + 100 = 2,882 of 10,000)
HEADLINE_RATES = (0.6, 0.448, 0.352, 0.28, 0.232, 0.184, 0.1296, 0.08)


def headline_server(scale: float = 1.0, **kw) -> OpenAIServer:
    """The loopback server serving the headline's verifier at `scale` x its published rate."""
    return OpenAIServer(
        rates=tuple(r * scale for r in HEADLINE_RATES), drafts_per_request=1250, model="google/gemma-4-31B-it", **kw
    )
