"""`specreg check` on the CLI: a hostile verifier config or draft is one line, never an internal error."""

from __future__ import annotations

import json
import os

import pytest

from conftest import fixture_config
from hostile_helpers import BIG_CONFIG, DATA_NATIVE, QWEN3_8B, local_verifier, run
from weights import write_draft

# -- every config fetch is capped ------------------------------------------------------------------------


def test_the_verifier_config_of_the_pre_flight_is_capped(hub, tmp_path):
    """A 300 MiB verifier config.json was downloaded into the HF cache and kept."""
    hub.add("org/huge-verifier", {"config.json": BIG_CONFIG})
    src = write_draft(tmp_path / "src", fixture_config("dflash"))
    r = run("check", str(src), "--verifier", "org/huge-verifier", "--no-weights")
    assert r.returncode == 2 and "over the 4194304-byte limit" in r.stderr, r.stderr
    assert hub.bytes_sent("config.json") == 0


# -- every reader, every file-system shape ---------------------------------------------------------------------


@pytest.mark.parametrize("where", ["speculators", "native"])
def test_a_hidden_size_that_is_an_object_is_not_an_internal_error(tmp_path, where):
    if where == "native":
        cfg = json.loads((DATA_NATIVE / "zlab_dflash_qwen3_8b_fixture.json").read_text())
        cfg["hidden_size"] = {}
    else:
        cfg = fixture_config("eagle3_generated")
        cfg["transformer_layer_config"]["hidden_size"] = {}
    src = write_draft(tmp_path / "src", cfg)
    r = run("check", str(src), "--verifier", str(local_verifier(tmp_path)))
    assert r.returncode in (1, 2) and "internal error" not in r.stderr, r.stderr


def test_a_verifier_config_that_is_a_fifo_is_refused_not_waited_on(tmp_path):
    """read_config opened whatever it was given: a FIFO verifier config.json made check wait for ever."""
    src = write_draft(tmp_path / "src", fixture_config("dflash"))
    verifier = tmp_path / "verifier"
    verifier.mkdir()
    os.mkfifo(verifier / "config.json")
    r = run("check", str(src), "--verifier", str(verifier), "--no-weights")
    assert r.returncode == 2 and "a FIFO, not a regular file" in r.stderr, r.stderr


# -- offline means cached (issue 45) ------------------------------------------------------------------------


def closed_port_url() -> str:
    """A loopback URL nothing listens on: the Hub unreachable."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def hub_draft(hub, tmp_path) -> bytes:
    """org/draft (the DFlash fixture and its weights) and its verifier on the loopback Hub."""
    src = write_draft(tmp_path / "src", fixture_config("dflash"))
    weights = (src / "model.safetensors").read_bytes()
    hub.add("org/draft", {"config.json": (src / "config.json").read_bytes(), "model.safetensors": weights})
    hub.add("Qwen/Qwen3-8B", {"config.json": json.dumps(QWEN3_8B).encode()})
    return weights


def weights_line(stdout: str) -> str:
    return next(line for line in stdout.splitlines() if line.lstrip().startswith("weights "))


@pytest.mark.parametrize("gone", ["unreachable", "offline"])
def test_check_reads_cached_weights_when_the_hub_is_gone(hub, tmp_path, gone):
    hub_draft(hub, tmp_path)
    online = run("check", "org/draft")  # the fixture's tiny weights do not fit its config: 3 errors
    assert online.returncode == 1 and "weights-fc-shape" in online.stdout, online.stderr
    fetched = run("materialize", "org/draft", str(tmp_path / "m"), "-q")  # the weights into the HF cache
    assert fetched.returncode == 0, fetched.stderr
    env = {"HF_ENDPOINT": closed_port_url()} if gone == "unreachable" else {"HF_HUB_OFFLINE": "1"}
    r = run("check", "org/draft", env=env)
    assert r.returncode == 1 and "internal error" not in r.stderr, r.stderr
    assert weights_line(r.stdout).split(";")[0] == weights_line(online.stdout).split(";")[0]
    assert r.stdout.replace(weights_line(r.stdout), "") == online.stdout.replace(weights_line(online.stdout), "")


@pytest.mark.parametrize("gone", ["unreachable", "offline"])
def test_check_without_cached_weights_and_no_hub_is_one_line_with_the_fix(hub, tmp_path, gone):
    hub_draft(hub, tmp_path)
    assert run("check", "org/draft", "--no-weights").returncode == 0  # the configs are cached, the weights are not
    env = {"HF_ENDPOINT": closed_port_url()} if gone == "unreachable" else {"HF_HUB_OFFLINE": "1"}
    r = run("check", "org/draft", env=env)
    assert r.returncode == 2 and r.stdout == "", r.stderr
    (line,) = [x for x in r.stderr.splitlines() if x.startswith("error: ")]
    assert "safetensors headers of org/draft" in line and "--no-weights" in line and "internal error" not in line
    assert run("check", "org/draft", "--no-weights", env=env).returncode == 0


def test_a_verifier_the_hub_cannot_give_is_one_line_naming_a_local_one(hub, tmp_path):
    src = write_draft(tmp_path / "src", fixture_config("dflash"))
    r = run("check", str(src), "--no-weights", env={"HF_ENDPOINT": closed_port_url()})
    assert r.returncode == 2 and "internal error" not in r.stderr
    (line,) = r.stderr.splitlines()
    assert line.startswith("error: Qwen/Qwen3-8B: ") and "--verifier LOCAL_DIR" in line


# -- check --gpu as a user reads it ----------------------------------------------------------------------------


def mixed_draft(tmp_path):
    """The example DFlash with two causal sliding layers among bidirectional full ones, and a Qwen3 verifier."""
    from conftest import DATA

    cfg = json.loads((DATA.parent.parent / "examples" / "qwen3-8b-dflash" / "config.json").read_text())
    cfg["transformer_layer_config"].update(
        layer_types=["sliding_attention", "full_attention", "sliding_attention", "full_attention", "full_attention"],
        sliding_window=2048,
    )
    src = write_draft(tmp_path / "src", cfg)
    return src, local_verifier(tmp_path)


def gpu_block(r):
    lines = r.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("  gpu "))
    return lines[start : lines.index("", start)]


def test_the_gpu_lines_name_the_backend_query_not_the_layers_mask(tmp_path):
    """`check --gpu` printed "sliding: non-causal" for the layers `show` calls causal."""
    src, verifier = mixed_draft(tmp_path)
    r = run("check", str(src), "--verifier", str(verifier), "--no-weights", "--vllm", "0.33", "--gpu", "H100")
    assert r.returncode == 0, r.stderr
    heads = [line for line in gpu_block(r) if line.startswith("    ") and not line.startswith("     ")]
    assert heads[:2] == [
        "    draft layers 1, 3, 4 (full): head size 128, backend asked for non-causal attention (vLLM asks it "
        "for every draft layer when one is non-causal)",
        "    draft layers 0, 2 (sliding): head size 128, backend asked for non-causal attention, sliding window",
    ]


def test_a_backend_every_group_refuses_is_said_once(tmp_path):
    src, verifier = mixed_draft(tmp_path)
    r = run(
        "check", str(src), "--verifier", str(verifier), "--no-weights", "--vllm", "0.33", "--gpu", "H100",
        "--kv-cache-dtype", "fp8",
    )  # fmt: skip
    block = gpu_block(r)
    turbo = [line for line in block if "TURBOQUANT" in line]
    assert turbo == [
        "    every group refuses TURBOQUANT: kv_cache_dtype not supported, non-causal attention not supported, "
        "sliding window not supported (draft layers 0, 2)"
    ]
    assert not any(line.strip().startswith("refuses  TURBOQUANT") for line in block)
