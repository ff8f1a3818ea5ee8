"""The report page in headless Chromium (pytest -m browser; needs Debian's `chromium`).

It builds a report from a real `--server` run against the loopback server, renders the index and a
model page with Chromium, and reads the DOM Chromium produced: the catalog rows and verdicts are
there, and every image decoded (the page marks each <img> with data-loaded once it has loaded).
"""

import os
import re
import shutil
import subprocess
import sys

import pytest

from openai_server import OpenAIServer
from test_verify import ENTRY, verify_args, write_rows

pytestmark = pytest.mark.browser

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--virtual-time-budget=5000", "--dump-dom"]


@pytest.fixture(scope="module")
def chromium():
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if not path:
        pytest.fail("the browser tier needs Chromium: apt-get install -y chromium", pytrace=False)
    return path


def render(chromium, page, profile):
    r = subprocess.run([chromium, *FLAGS, f"--user-data-dir={profile}", page.as_uri()], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout


def test_the_report_renders_rows_and_images(chromium, tmp_path):
    reg = tmp_path / "registry"
    (reg / "org").mkdir(parents=True)
    (reg / "org" / "draft.toml").write_text(ENTRY)
    (reg / "org" / "other.toml").write_text(ENTRY.replace("org/draft", "org/other"))
    rows = write_rows(tmp_path / "gsm8k.jsonl")
    out = tmp_path / "results" / "org--draft"
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    with OpenAIServer(rates=(0.8, 0.6, 0.4)) as server:
        for _ in range(2):
            subprocess.run([sys.executable, "-m", "specreg", *verify_args(server, reg, rows, out)], check=True,
                           env=env, capture_output=True, timeout=180)
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "specreg", "report", str(tmp_path / "results"), "--out", str(site),
                    "--registry", str(reg)], check=True, env=env, capture_output=True, timeout=180)

    index = render(chromium, site / "index.html", tmp_path / "profile1")
    rows_seen = re.findall(r"<tr class=\"(\w[\w-]*)\" data-model=\"([^\"]+)\">", index)
    assert rows_seen == [("pass", "org/draft"), ("none", "org/other")]
    assert "<td class=\"verdict\">pass</td>" in index

    page = render(chromium, site / "models" / "org--draft.html", tmp_path / "profile2")
    images = re.findall(r"<img[^>]*>", page)
    assert len(images) == 2
    assert all('data-loaded="yes"' in img for img in images), images
