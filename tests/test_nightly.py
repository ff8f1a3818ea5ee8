"""The nightly workflow's own commands, run on a loopback vLLM server across two nights: a shard with
a regressed entry keeps its results, entries without a runnable baseline are reported as such, and the
second night's report merges every shard's history with the first night's and shows the AL trend.

The shell of each step is read from .github/workflows/nightly.yml (only the venv/pip set-up lines are
left out, and `.venv/bin/specreg` is this interpreter's specreg); what the GitHub actions do between
steps (artifact download into results/results-shard-N, the history cache) is done here by copying."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from openai_server import OpenAIServer
from verify_helpers import ENTRY as VERIFY_ENTRY

REPO_ROOT = Path(__file__).resolve().parents[1]


def entry(name: str, dataset: str, al: float) -> str:
    """verify_helpers' catalog entry, renamed, on `dataset`, with baseline AL `al` (two-sided 5%)."""
    return (
        VERIFY_ENTRY.replace("org/draft", f"org/{name}")
        .replace('dataset = "gsm8k"', f'dataset = "{dataset}"')
        .replace("value = 2.8", f"value = {al}")
    )


def steps(job: str) -> dict[str, str]:
    wf = yaml.safe_load((REPO_ROOT / ".github" / "workflows" / "nightly.yml").read_text())
    return {s.get("name", s.get("uses", "")): s for s in wf["jobs"][job]["steps"]}


def shell(script: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    lines = [line for line in script.splitlines() if "venv" not in line or "bin/specreg" in line]
    text = "\n".join(lines).replace(".venv/bin/specreg", f"{sys.executable} -m specreg")
    return subprocess.run(
        ["bash", "-e", "-c", text], cwd=cwd, env={**os.environ, **env}, capture_output=True, text=True, timeout=300
    )


def report_night(
    runner: Path, reporter: Path, shards: list, history_cache: Path, report_step: str, env: dict[str, str]
) -> None:
    """What the workflow does after the verify shards of one night: download-artifact puts each shard's
    results in results/results-shard-N, the history cache is restored into history/, the report step
    runs, and the cache save step keeps history/ for the next night."""
    for shard in shards:
        shutil.copytree(runner / "results" / f"shard-{shard}", reporter / "results" / f"results-shard-{shard}")
    if history_cache.exists():
        shutil.copytree(history_cache, reporter / "history")
    r = shell(report_step, reporter, env)
    assert r.returncode == 0, r.stderr
    shutil.rmtree(history_cache, ignore_errors=True)
    shutil.copytree(reporter / "history", history_cache)


@pytest.mark.workflow  # 16 fresh processes (each verify shard and report, twice): .ci/run runs the tier
def test_two_nights_keep_a_regressed_shard_and_grow_the_trend(tmp_path):
    reg = tmp_path / "registry"
    (reg / "org").mkdir(parents=True)
    for name, dataset, al in (("a", "gsm8k", 2.8), ("b", "gsm8k", 3.6), ("c", "vllm-test-prompts", 2.8)):
        (reg / "org" / f"{name}.toml").write_text(entry(name, dataset, al))
    rows = tmp_path / "gsm8k.jsonl"
    rows.write_text("".join(json.dumps({"question": f"q{i}", "answer": str(i)}) + "\n" for i in range(12)))
    verify_step = steps("verify")["Verify this shard"]["run"]
    report_step = next(s for n, s in steps("report").items() if n.startswith("Build the report"))["run"]
    shards = yaml.safe_load((REPO_ROOT / ".github" / "workflows" / "nightly.yml").read_text())["jobs"]["verify"][
        "strategy"
    ]["matrix"]["shard"]
    env = {"SPECREG_REGISTRY": str(reg), "HF_HUB_OFFLINE": "1"}
    history_cache = tmp_path / "cache-history"
    with OpenAIServer(rates=(0.8, 0.6, 0.4)) as server:
        for night in (1, 2):
            runner, reporter = tmp_path / f"night{night}-runner", tmp_path / f"night{night}-report"
            runner.mkdir()
            codes = {}
            for shard in shards:
                cmd = (
                    verify_step.replace("${{ matrix.shard }}", str(shard))
                    + f" --server {server.url} --dataset-file gsm8k={rows}"
                )
                codes[shard] = shell(cmd, runner, env).returncode
            # b regresses (its shard fails) and its results are kept; c cannot be run and says so
            results = {
                d.parent.name: json.loads(d.read_text())["verdict"] for d in runner.glob("results/*/*/result.json")
            }
            assert results == {"org--a": "pass", "org--b": "regressed", "org--c": "not-runnable"}
            assert sorted(codes.values()) == [0, 0, 0, 1]
            assert not any(p.is_symlink() for p in runner.rglob("*"))  # nothing for upload-artifact to follow
            report_night(runner, reporter, shards, history_cache, report_step, env)
            with sqlite3.connect(reporter / "history" / "history.sqlite") as db:
                per_model = dict(db.execute("SELECT model, count(*) FROM runs GROUP BY model"))
            assert per_model == {"org/a": night, "org/b": night, "org/c": night}
            site = reporter / "site" / "models"
            for model in ("org--a", "org--b"):
                assert (site / f"{model}-trend.png").exists() is (night == 2), (night, model)
            page = (site / "org--c.html").read_text()
            assert "not-runnable" in page and "no primary baseline on a dataset verify can load" in page


def test_the_workflow_keeps_results_when_a_shard_fails():
    verify = steps("verify")
    save = next(s for n, s in verify.items() if n.startswith("Save this shard"))
    assert save["uses"].startswith("actions/cache/save") and save["if"] == "always()"
    assert verify["Upload results"]["if"] == "always()"
    keep = next(s for n, s in steps("report").items() if n.startswith("Keep the merged history"))
    assert keep["uses"].startswith("actions/cache/save") and keep["if"] == "always()"


def test_a_cpu_canary_runs_the_engine_tier_every_night_without_the_h100s():
    """The cpu-canary job: a standard runner, the nightly schedule, the engine tier's own script, and
    no dependency on the H100 jobs (a night without them still proves fetch to verdict)."""
    wf = yaml.safe_load((REPO_ROOT / ".github" / "workflows" / "nightly.yml").read_text())
    job = wf["jobs"]["cpu-canary"]
    assert job["runs-on"] == "ubuntu-latest" and "needs" not in job
    runs = [s["run"] for s in job["steps"] if "run" in s]
    assert runs == ["bash .ci/engine-tier"]
    assert (REPO_ROOT / ".ci" / "engine-tier").read_text().count("pytest -q -m engine") == 1
    cached = [s for s in job["steps"] if s.get("uses", "").startswith("actions/cache")]
    assert cached and cached[0]["with"]["path"] == "~/.cache/specreg/engine-venv"


def test_the_history_lives_on_a_branch_the_next_night_restores(tmp_path):
    """The report job's restore and push steps, run as written against a local bare repository
    standing in for GitHub: night 1 pushes history.sqlite to nightly-history, night 2 restores it
    (a cache is evicted after 7 days unused; a branch is not)."""
    report = steps("report")
    restore = next(s for n, s in report.items() if n.startswith("Restore the merged history"))["run"]
    push = next(s for n, s in report.items() if n.startswith("Push the merged history"))["run"]
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    url = '"https://x-access-token:${GITHUB_TOKEN}@github.com/${{ github.repository }}.git"'
    assert url in push
    push = push.replace(url, str(remote)).replace("${{ github.run_id }}", "1")
    env = {"GITHUB_TOKEN": "t", "GIT_CONFIG_GLOBAL": str(tmp_path / "gitconfig")}
    nights = []
    for night in (1, 2):
        work = tmp_path / f"night{night}"
        subprocess.run(["git", "init", "-q", str(work)], check=True)
        subprocess.run(["git", "-C", str(work), "remote", "add", "origin", str(remote)], check=True)
        done = shell(restore, work, env)
        assert done.returncode == 0, done.stderr
        nights.append((work / "history" / "history.sqlite").exists())
        (work / "history" / "history.sqlite").write_bytes(f"night {night}".encode())
        done = shell(push, work, env)
        assert done.returncode == 0, done.stderr
    assert nights == [False, True]
    shown = subprocess.run(["git", "-C", str(remote), "show", "nightly-history:history.sqlite"], capture_output=True)
    assert shown.stdout == b"night 2"


def test_the_nightly_pins_vllm_to_the_newest_version_specregs_rules_cover():
    from specreg.normalization.capabilities import NEWEST_KNOWN

    install = steps("verify")["Install specreg, vLLM and the verify dependencies"]
    assert install["env"]["VLLM_ASKED"] == "${{ github.event.inputs.vllm }}"
    line = next(s for s in install["run"].splitlines() if s.strip().startswith("VLLM="))
    code = line.split("-c '", 1)[1].split("'", 1)[0]
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert got == str(NEWEST_KNOWN) and 'pip install -q "vllm==$VLLM"' in install["run"]


def test_the_nightly_workflow_is_valid():
    import yaml

    wf = yaml.safe_load((REPO_ROOT / ".github" / "workflows" / "nightly.yml").read_text())
    on = wf.get("on", wf.get(True))
    assert "schedule" in on and "workflow_dispatch" in on
    verify = wf["jobs"]["verify"]
    assert "H100" in verify["runs-on"] and "self-hosted" in verify["runs-on"]
    shards = verify["strategy"]["matrix"]["shard"]
    runs = " ".join(step.get("run", "") for step in verify["steps"])
    assert "specreg verify --all" in runs and f"/{len(shards)}" in runs and "--resume" in runs
    report = wf["jobs"]["report"]
    assert report["needs"] == "verify" and "specreg report" in " ".join(s.get("run", "") for s in report["steps"])
