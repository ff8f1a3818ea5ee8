"""tests/openai_server.py, the loopback vLLM-like server the verify tests run against."""

import re
import subprocess
import sys

from verify_helpers import REPO_ROOT


def test_the_loopback_openai_server_runs_on_its_own():
    """`python tests/openai_server.py` prints its URL and serves; one request is answered."""
    import httpx

    proc = subprocess.Popen(
        [sys.executable, str(REPO_ROOT / "tests" / "openai_server.py"), "--model", "me/mine", "--version", "0.30.0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        url = proc.stdout.readline().strip()
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+", url), url
        assert httpx.get(f"{url}/v1/models", timeout=30).json()["data"][0]["id"] == "me/mine"
        assert httpx.get(f"{url}/version", timeout=30).json() == {"version": "0.30.0"}
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        proc.stdout.close()
