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
from verify_helpers import ENTRY, verify_args, write_rows

pytestmark = pytest.mark.browser

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--virtual-time-budget=5000",
    "--dump-dom",
]


@pytest.fixture(scope="module")
def chromium():
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if not path:
        pytest.fail("the browser tier needs Chromium: apt-get install -y chromium", pytrace=False)
    return path


def render(chromium, page, profile):
    r = subprocess.run(
        [chromium, *FLAGS, f"--user-data-dir={profile}", page.as_uri()], capture_output=True, text=True, timeout=120
    )
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
            subprocess.run(
                [sys.executable, "-m", "specreg", *verify_args(server, reg, rows, out)],
                check=True,
                env=env,
                capture_output=True,
                timeout=180,
            )
    site = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "specreg",
            "report",
            str(tmp_path / "results"),
            "--out",
            str(site),
            "--registry",
            str(reg),
        ],
        check=True,
        env=env,
        capture_output=True,
        timeout=180,
    )

    index = render(chromium, site / "index.html", tmp_path / "profile1")
    rows_seen = re.findall(r"<tr class=\"(\w[\w-]*)\" data-model=\"([^\"]+)\">", index)
    assert rows_seen == [("pass", "org/draft"), ("none", "org/other")]
    assert '<td class="verdict">pass</td>' in index

    page = render(chromium, site / "models" / "org--draft.html", tmp_path / "profile2")
    images = re.findall(r"<img[^>]*>", page)
    assert len(images) == 2
    assert all('data-loaded="yes"' in img for img in images), images


def screenshot(chromium, page, profile, out, size="1000,2400"):
    flags = [f for f in FLAGS if f != "--dump-dom"]
    r = subprocess.run(
        [chromium, *flags, f"--user-data-dir={profile}", f"--screenshot={out}", f"--window-size={size}", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0 and out.exists(), r.stderr[-2000:]
    from PIL import Image

    return Image.open(out).convert("RGB")


def bands(image, colour, tolerance=8):
    """The rows of the screenshot where a colour (a verdict's background) fills a run of pixels: the
    structure of the page as drawn, compared without pixel-exact images."""
    width, height = image.size
    pixels = image.load()
    found = []
    for y in range(0, height, 2):
        run = 0
        for x in range(0, width, 2):
            r, g, b = pixels[x, y]
            if abs(r - colour[0]) + abs(g - colour[1]) + abs(b - colour[2]) <= tolerance:
                run += 1
                if run >= 20:
                    found.append(y)
                    break
            else:
                run = 0
    return found


def test_a_regressed_entry_with_two_baselines_renders_first_and_with_two_trends(chromium, tmp_path):
    """The report of verify_helpers' two-baseline case in Chromium: the index draws the regressed row
    (red) above the others, the entry page draws two series, each with its decoded trend image, and
    the regressed series' red band above the passing one's green."""
    from verify_helpers import two_baseline_report

    _, site = two_baseline_report(tmp_path)

    index = render(chromium, site / "index.html", tmp_path / "p1")
    assert re.findall(r"<tr class=\"(\w[\w-]*)\" data-model=\"([^\"]+)\">", index) == [
        ("regressed", "org/draft"),
        ("none", "org/other"),
    ]
    page = render(chromium, site / "models" / "org--draft.html", tmp_path / "p2")
    assert re.findall(r"data-series=\"([^\"]+)\"", page) == ["mt-bench, baseline 0", "gsm8k, baseline 1"]
    images = re.findall(r"<img[^>]*>", page)
    assert len(images) == 3 and all('data-loaded="yes"' in i for i in images), images  # per-position + 2 trends

    shot = screenshot(chromium, site / "index.html", tmp_path / "p3", tmp_path / "index.png", "1000,600")
    red, grey = bands(shot, (0xFF, 0xDD, 0xDD)), bands(shot, (0xEE, 0xEE, 0xEE))
    # rows with one colour only are the table's rows (the counts line has both): the regressed row first
    rows_red, rows_grey = [y for y in red if y not in grey], [y for y in grey if y not in red]
    assert rows_red and rows_grey and max(rows_red) < min(rows_grey)
    shot = screenshot(chromium, site / "models" / "org--draft.html", tmp_path / "p4", tmp_path / "page.png")
    red, green = bands(shot, (0xFF, 0xDD, 0xDD)), bands(shot, (0xDD, 0xFF, 0xDD))
    assert red and green and min(red) < min(green)  # the verdict's band, then the series: regressed above pass
