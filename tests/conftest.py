import copy
import json
import os
from pathlib import Path

import pytest

# Where bytecode writing is off (PYTHONDONTWRITEBYTECODE, as on the CI machine), every interpreter a test
# starts (the CLI as a user runs it, the kill-at-every-step writers, the xdist workers) compiled specreg,
# attrs and huggingface_hub from source: about 0.14 of the CLI's 0.25 s, paid by some 600 processes a run.
# The suite's processes keep one bytecode cache outside the checkout instead; the code they run is the same.
if os.environ.get("PYTHONDONTWRITEBYTECODE"):
    del os.environ["PYTHONDONTWRITEBYTECODE"]
    os.environ.setdefault("PYTHONPYCACHEPREFIX", str(Path.home() / ".cache" / "specreg-tests" / "pycache"))

# Fixtures that test files of several modules share live in these helper modules.
pytest_plugins = ["verify_helpers"]

DATA = Path(__file__).parent / "data"
#: where the fixtures of speculators configs are: tests/data/speculators, and the folder of an algorithm
#: a test adds to a copy of algos/ (tests/test_registry.py's added_algorithm)
SPECULATORS_DIRS = [DATA / "speculators"]


def pytest_sessionstart(session):
    """The CPU, once per run of a tier that starts vLLM's CPU engine (written under -q too, which
    drops the report header): vLLM picks its kernels by it (tests/engine_tier/engines.py), so a
    failure says which path ran."""
    expr = session.config.getoption("markexpr") or ""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None or not any(m in expr.replace(f"not {m}", "") for m in ("engine", "trainer")):
        return
    from engine_tier.engines import cpu_report

    reporter.write_line(cpu_report())


@pytest.fixture(autouse=True)
def _own_specreg_cache(tmp_path, monkeypatch):
    """No test writes to the user's ~/.cache/specreg (serve materializes drafts there) or Hub cache.
    Waiting is not testing: specreg's Hub back-off (SPECREG_HUB_BACKOFF, not the number of retries) and
    verify's idle check (SPECREG_VERIFY_IDLE_WAIT) are tiny here, in-process and in every subprocess a
    test starts; a test about a default's own timing deletes the variable."""
    monkeypatch.setenv("SPECREG_CACHE", str(tmp_path / "specreg-cache"))
    # nor reads another test's Hub cache: huggingface_hub fixes its default cache when first imported,
    # possibly inside a test that had set HF_HUB_CACHE (specreg reads the variable on every fetch)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.setenv("SPECREG_HUB_BACKOFF", "0.01")
    monkeypatch.setenv("SPECREG_VERIFY_IDLE_WAIT", "0")


@pytest.fixture
def hub(tmp_path, monkeypatch):
    """A loopback Hub (tests/hub_server.py) as HF_ENDPOINT, with a fresh HF cache and no token."""
    from hub_server import FakeHub

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HUB_DISABLE_IMPLICIT_TOKEN", "1")
    with FakeHub() as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        yield server


#: native files with no speculators-format twin: causal everywhere, layouts vLLM cannot serve, Eagle-3
#: layers vLLM's speculators mapping refuses (convert refuses each; tests/test_native.py)
NO_TWIN = frozenset(
    {
        "deepspec_dspark_qwen3_8b_causal.json",
        "specforge_qwen3_8b_domino.json",
        "specforge_qwen3_8b_peagle.json",
        "specforge_phi4_eagle3.json",
        "specforge_qwq_32b_eagle3.json",
        "nemo_jetspec_qwen3_8b.json",
    }
)


def run_specreg(*args: str, env: dict | None = None, cwd=None, timeout: float = 120):
    """`python -m specreg ARGS` in a fresh process: the CLI as a user runs it (stdout/stderr captured)."""
    import os
    import subprocess
    import sys

    return subprocess.run(
        [sys.executable, "-m", "specreg", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def run_in_process(*args: str, env: dict | None = None):
    """`specreg ARGS` as `specreg.cli.main.main` in this process, with `env` set for the call and
    stdout/stderr captured: the same CompletedProcess as run_specreg, without starting an interpreter
    (verify's imports alone take ~2 s each time). For output and exit codes only: a test about a real
    process (signals, the interpreter's exit, what a fresh process reads) keeps run_specreg."""
    import contextlib
    import io
    import os
    import subprocess

    from specreg.cli.main import main

    saved = {k: os.environ.get(k) for k in env or {}}
    out, err = io.StringIO(), io.StringIO()
    try:
        os.environ.update(env or {})
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as exc:  # argparse's refusals
                code = exc.code if isinstance(exc.code, int) else 1
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return subprocess.CompletedProcess(["specreg", *args], code, out.getvalue(), err.getvalue())


def serving_release(algorithm: str) -> str | None:
    """The wheel of the newest known vLLM release that serves `algorithm` (a release may remove one,
    as 0.34 removed P-EAGLE), None when none does."""
    from packaging.version import Version

    from specreg import facts
    from specreg.normalization import algorithms

    algo = algorithms.get(algorithm)
    served = [r for r in facts.known() if algo.method is not None and algo.served_by(Version(r))]
    return facts.wheel(served[-1]) if served else None


def fixture_config(name: str) -> dict:
    """A fresh copy of a fixture config (speculators/NAME.json)."""
    path = next((d / f"{name}.json" for d in SPECULATORS_DIRS if (d / f"{name}.json").exists()), None)
    return json.loads((path or DATA / "speculators" / f"{name}.json").read_text())


@pytest.fixture
def fx():
    return fixture_config


@pytest.fixture
def variant():
    """variant(name, **changes): a fixture with dotted-path changes; a value of DROP removes the key."""

    def make(name, **changes):
        cfg = fixture_config(name)
        for dotted, value in changes.items():
            node = cfg
            parts = dotted.split("__")
            for p in parts[:-1]:
                node = node[int(p)] if isinstance(node, list) else node[p]
            last = parts[-1]
            if value is DROP:
                del node[last]
            else:
                node[last] = copy.deepcopy(value)
        return cfg

    return make


class _Drop:
    def __repr__(self):
        return "DROP"


DROP = _Drop()


def codes(spec):
    """The finding codes of a Speculator, in order."""
    return [f.code for f in spec.findings]


def finding(spec, code):
    """The one finding with `code`."""
    (f,) = [f for f in spec.findings if f.code == code]
    return f
