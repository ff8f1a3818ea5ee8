"""How many requests and bytes a load costs, against the loopback Hub: cold, warm, pinned, offline."""

from __future__ import annotations

import pytest

import specreg
from conftest import ROOT, record

CONFIG = (ROOT / "tests" / "data" / "speculators" / "dflash.json").read_bytes()


@pytest.fixture
def hub(tmp_path, monkeypatch):
    from hub_server import FakeHub

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_DISABLE_IMPLICIT_TOKEN", "1")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with FakeHub() as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        yield server


def _delta(hub, action):
    before_requests, before_bytes = hub.count(), hub.bytes_sent()
    files_before = {p for _, p, _, _ in hub.transfers}
    action()
    files = {p.rsplit("/", 1)[-1] for _, p, _, n in hub.transfers if n} - {p.rsplit("/", 1)[-1] for p in files_before}
    return hub.count() - before_requests, hub.bytes_sent() - before_bytes, files


def test_request_counts(hub, monkeypatch):
    hub.add("org/model", {"config.json": CONFIG, "model.safetensors": b"\0" * 4096})
    commit = hub.repos["org/model"].refs["main"]
    cold = _delta(hub, lambda: specreg.load("org/model", vllm="0.33"))
    warm = _delta(hub, lambda: specreg.load("org/model", vllm="0.33"))
    pinned_cold = _delta(hub, lambda: specreg.load(f"org/model@{commit}", vllm="0.33"))
    pinned = _delta(hub, lambda: specreg.load(f"org/model@{commit}", vllm="0.33"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    offline = _delta(hub, lambda: specreg.load("org/model", vllm="0.33"))
    assert cold[2] == {"config.json"}  # a cold load transfers config.json only
    assert pinned[0] == 0 and offline[0] == 0
    for label, (n, size, _) in [
        ("cold (org/name, nothing cached)", cold),
        ("warm (org/name, cached)", warm),
        ("pinned (org/name@commit, after the branch load)", pinned_cold),
        ("pinned, again", pinned),
        ("offline (HF_HUB_OFFLINE=1, cached)", offline),
    ]:
        record(f"requests: {label}", f"{n} requests, {size} body bytes", "")
