"""specreg's speed and memory (pytest-benchmark), and the side-by-side with vLLM's and speculators'
loaders. Run: .venv/bin/python -m pytest benchmarks -q -s  (figures printed at the end)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

import specreg
from conftest import ROOT, process, record

PY = sys.executable
VLLM_PY = Path(os.environ.get("SPECREG_VLLM_PYTHON", Path.home() / ".cache/specreg/vllm-venv/bin/python"))
SPEC_PY = Path(os.environ.get("SPECREG_SPECULATORS_PYTHON", Path.home() / ".cache/specreg/spec-venv/bin/python"))


def test_import_cost():
    bare, _ = process([PY, "-c", "pass"], runs=15)
    with_specreg, _ = process([PY, "-c", "import specreg"], runs=15)
    added = (with_specreg - bare) * 1000
    record("import specreg (added to a bare interpreter)", f"{added:.1f} ms", "target < 30 ms")


def test_show_whole_process(draft_dir):
    seconds, mib = process([PY, "-m", "specreg", "show", str(draft_dir)], runs=9)
    record("specreg show DIR (whole process)", f"{seconds * 1000:.0f} ms, {mib:.1f} MiB", "target < 150 ms, 40 MiB")


def test_normalize(benchmark):
    cfg = json.loads((ROOT / "tests" / "data" / "speculators" / "dflash.json").read_text())
    specreg.normalize(cfg, vllm="0.33")
    benchmark(specreg.normalize, cfg, vllm="0.33")
    record("normalize(dflash fixture), median", f"{benchmark.stats.stats.median * 1e6:.0f} us", "target < 200 us")


def test_load_pinned_cached(benchmark, tmp_path, monkeypatch):
    from hub_server import FakeHub

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_DISABLE_IMPLICIT_TOKEN", "1")
    with FakeHub() as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        commit = hub.add("org/draft", {"config.json": (ROOT / "tests/data/speculators/dflash.json").read_bytes()})
        source = f"org/draft@{commit}"
        specreg.load(source, vllm="0.33")  # cold: fills the cache
        before = hub.count()
        benchmark(specreg.load, source, vllm="0.33")
        requests = hub.count() - before
    assert requests == 0
    record(
        "load(org/name@commit), cached, warm, median",
        f"{benchmark.stats.stats.median * 1e3:.2f} ms, {requests} HTTP requests",
        "target < 2 ms, 0 requests",
    )


def _synthetic_catalog(root: Path, n: int) -> Path:
    template = (ROOT / "registry" / "RedHatAI" / "Llama-3.1-8B-Instruct-speculator.eagle3.toml").read_text()
    for i in range(n):
        org = f"org{i % 37}"
        name = f"draft-{i}.eagle3"
        d = root / org
        d.mkdir(parents=True, exist_ok=True)
        text = template.replace("RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3", f"{org}/{name}")
        (d / f"{name}.toml").write_text(text)
    return root


@pytest.mark.parametrize("n", [10, 100, 1000])
def test_catalog_check_scaling(benchmark, tmp_path, n):
    from specreg import entries

    root = _synthetic_catalog(tmp_path / "registry", n)
    report = entries.check(root)
    assert report.entries == n and not report.problems
    tracemalloc.start()
    entries.check(root)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    benchmark.pedantic(entries.check, args=(root,), rounds=3 if n == 1000 else 5, iterations=1)
    median = benchmark.stats.stats.median
    record(
        f"catalog check, {n} entries",
        f"{median * 1000:.0f} ms, peak {peak / 2**20:.1f} MiB ({median / n * 1e6:.0f} us/entry)",
        "target < 1 s at 1,000" if n == 1000 else "",
    )


# -- side by side: a vLLM-ready config from the same local draft, as whole processes ----------------

SPECULATORS_CODE = (
    "import sys; from speculators import SpeculatorModelConfig; SpeculatorModelConfig.from_pretrained(sys.argv[1])"
)
VLLM_CODE = (
    "import sys; from vllm.transformers_utils.configs.speculators import SpeculatorsConfig; "
    "SpeculatorsConfig.from_pretrained(sys.argv[1])"
)


def _works(python: Path, code: str, arg: str) -> str | None:
    if not python.exists():
        return f"{python} not found"
    r = subprocess.run([str(python), "-c", code, arg], capture_output=True, text=True, timeout=600)
    return None if r.returncode == 0 else r.stderr.strip().splitlines()[-1]


def test_side_by_side(draft_dir):
    ours = process([PY, "-m", "specreg", "show", str(draft_dir), "--json"], runs=7)
    record("side by side: specreg show --json", f"{ours[0]:.2f} s, {ours[1]:.0f} MiB", "")
    rows = [
        ("vLLM SpeculatorsConfig.from_pretrained", VLLM_PY, VLLM_CODE),
        ("speculators SpeculatorModelConfig.from_pretrained", SPEC_PY, SPECULATORS_CODE),
    ]
    skipped = []
    for label, python, code in rows:
        why = _works(python, code, str(draft_dir))
        if why:
            skipped.append(f"{label}: {why}")
            record(f"side by side: {label}", "not measured", why[:60])
            continue
        theirs = process([str(python), "-c", code, str(draft_dir)], runs=3)
        record(
            f"side by side: {label}",
            f"{theirs[0]:.2f} s, {theirs[1]:.0f} MiB",
            f"{theirs[0] / ours[0]:.0f}x the time, {theirs[1] / ours[1]:.0f}x the memory of specreg",
        )
    if len(skipped) == len(rows):
        pytest.skip("neither vLLM nor speculators is installed here: " + "; ".join(skipped))
