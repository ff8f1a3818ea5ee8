"""`specreg materialize --copy` killed half-way: the next run rolls the directory back, and the user's
files are never lost."""

from __future__ import annotations

import json
import os

import pytest

from conftest import fixture_config
from hostile_helpers import run

# -- a write killed half-way --------------------------------------------------------------------------------


def big_draft(tmp_path):
    """A draft whose weight takes a while to copy (48 MiB), so a write can be killed inside it."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "config.json").write_text(json.dumps(fixture_config("dflash")))
    from safetensors.numpy import save_file
    import numpy as np

    save_file({"fc.weight": np.zeros((48, 2**18), np.float32)}, str(src / "model.safetensors"))
    return src


def snapshot(directory):
    return {p.name: (os.readlink(p) if p.is_symlink() else p.read_bytes()) for p in sorted(directory.iterdir())}


def materialize_then_kill(src, out, when, extra=()):
    """Start `materialize SRC OUT --copy`, SIGKILL it when `when(out)` holds (or at the end)."""
    import signal
    import subprocess
    import sys
    import time

    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "specreg",
            "materialize",
            str(src),
            str(out),
            "--copy",
            "--verifier",
            "Qwen/Qwen3-8B",
            "-q",
            *extra,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=dict(os.environ),
    )
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline and not when(out):
        time.sleep(0.002)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)


def copying(out):
    """A weight is being copied into the write's stage folder (specreg/dirwrite.py)."""
    return out.is_dir() and any(
        (p / "files" / "model.safetensors").exists() for p in out.iterdir() if p.name.startswith(".specreg-stage-")
    )


DEBRIS = (".specreg-",)


def test_a_force_killed_while_copying_is_rolled_back_by_the_next_run(tmp_path):
    src = big_draft(tmp_path)
    out = tmp_path / "out"
    first = run("materialize", str(src), str(out), "--copy", "--verifier", "Qwen/Qwen3-8B")
    assert first.returncode == 0, first.stderr
    (out / "precious.txt").write_text("keep me")
    before = snapshot(out)
    materialize_then_kill(src, out, copying, ("--force",))
    assert any(d in p.name for p in out.iterdir() for d in DEBRIS)  # it was killed mid-write
    again = run("materialize", str(src), str(out), "--copy", "--force", "--verifier", "Qwen/Qwen3-8B")
    assert again.returncode == 0, again.stderr
    assert "rolled back an interrupted write" in again.stderr
    assert snapshot(out) == before  # the same draft written again: byte for byte, no debris


def test_a_fresh_directory_killed_half_way_is_not_refused_as_not_empty(tmp_path):
    src = big_draft(tmp_path)
    out = tmp_path / "out"
    materialize_then_kill(src, out, copying)
    again = run("materialize", str(src), str(out), "--copy", "--verifier", "Qwen/Qwen3-8B")
    assert again.returncode == 0, again.stderr
    assert not any(d in p.name for p in out.iterdir() for d in DEBRIS)


@pytest.mark.stress
def test_twenty_sigkills_at_random_points_never_lose_the_users_files(tmp_path):
    """pytest -m stress: 20 trials, each killed at a random moment of a --force write."""
    import random
    import time

    src = big_draft(tmp_path)
    out = tmp_path / "out"
    assert run("materialize", str(src), str(out), "--copy", "--verifier", "Qwen/Qwen3-8B").returncode == 0
    (out / "precious.txt").write_text("keep me")
    before = snapshot(out)
    rng = random.Random(25)
    for trial in range(20):
        stop_at = time.monotonic() + rng.uniform(0.0, 1.5)
        materialize_then_kill(src, out, lambda _o, stop_at=stop_at: time.monotonic() >= stop_at, ("--force",))
        again = run("materialize", str(src), str(out), "--copy", "--force", "--verifier", "Qwen/Qwen3-8B")
        assert again.returncode == 0, (trial, again.stderr)
        assert snapshot(out) == before, trial
