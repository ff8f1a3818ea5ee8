"""Hostile files (issue 25's worst three): nothing of the user's is deleted by `report --out`, the
manifest key `--force` relies on is checked before use (and fails closed), and weight files are
never followed out of the draft directory or read when they are not regular files."""

from __future__ import annotations

import hashlib
import hmac
import json
import os

import pytest

import specreg
from conftest import DATA, fixture_config, run_in_process, run_specreg
from interrupt import as_from_a_terminal
from weights import write_draft

DATA_NATIVE = DATA / "native"


def run(*args, env=None):
    return run_specreg(*args, env=env, timeout=60)


# -- report --out --------------------------------------------------------------------------------

@pytest.fixture
def results(tmp_path):
    folder = tmp_path / "results"
    folder.mkdir()
    return folder


def test_report_refuses_an_out_that_is_a_regular_file_and_keeps_it(results, tmp_path):
    mine = tmp_path / "notes.txt"
    mine.write_text("mine")
    r = run("report", str(results), "--out", str(mine))
    assert r.returncode == 2 and "is not a directory" in r.stderr and "Traceback" not in r.stderr
    assert mine.read_text() == "mine"


def test_report_refuses_an_out_that_is_a_link_and_touches_neither_end(results, tmp_path):
    target = tmp_path / "somewhere"
    target.mkdir()
    link = tmp_path / "site"
    link.symlink_to(target, target_is_directory=True)
    r = run("report", str(results), "--out", str(link))
    assert r.returncode == 2 and "is a link" in r.stderr
    assert link.is_symlink() and list(target.iterdir()) == []


def test_report_refuses_a_file_where_it_writes_its_model_pages(results, tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "models").write_text("mine")
    r = run("report", str(results), "--out", str(site))
    assert r.returncode == 2 and (site / "models").read_text() == "mine"


# -- the manifest key ------------------------------------------------------------------------------

def key_path(tmp_path):
    return tmp_path / "specreg-cache" / "manifest.key"  # SPECREG_CACHE (tests/conftest.py)


def planted(out, files, key: bytes) -> None:
    """A specreg.json listing `files`, signed the way specreg signs, with `key`."""
    doc = {"written_by": "specreg", "files": files}
    body = json.dumps(doc, sort_keys=True).encode()
    doc["signature"] = hmac.new(key, body, hashlib.sha256).hexdigest()
    (out / "specreg.json").write_text(json.dumps(doc))


@pytest.fixture
def victim(tmp_path):
    src = write_draft(tmp_path / "src", fixture_config("dflash"))
    out = tmp_path / "out"
    out.mkdir()
    (out / "precious.txt").write_text("keep me")
    return src, out


def test_a_new_key_is_whole_and_private(victim, tmp_path):
    src, out = victim
    specreg.load(src).materialize(tmp_path / "fresh", weights="none")
    key = key_path(tmp_path)
    assert len(key.read_bytes()) == 32 and (key.stat().st_mode & 0o777) == 0o600
    assert [p.name for p in key.parent.iterdir() if p.name.startswith(".manifest.key")] == []


@pytest.mark.parametrize("shape", ["empty", "short", "world-readable", "symlink", "fifo", "directory"])
def test_an_unusable_key_trusts_nothing_and_deletes_nothing(victim, tmp_path, shape):
    """An empty key (a full disk, a crash) would let anyone sign with hmac.new(b"") ; a readable one
    can be copied; a link can point at anything; a FIFO hung --force; a directory was exit 3."""
    src, out = victim
    key = key_path(tmp_path)
    key.parent.mkdir(parents=True, exist_ok=True)
    known = b""
    if shape == "empty":
        key.write_bytes(b"")
    elif shape == "short":
        known = b"x" * 8
        key.write_bytes(known)
        key.chmod(0o600)
    elif shape == "world-readable":
        known = os.urandom(32)
        key.write_bytes(known)
        key.chmod(0o644)
    elif shape == "symlink":
        known = os.urandom(32)
        (tmp_path / "elsewhere.key").write_bytes(known)
        (tmp_path / "elsewhere.key").chmod(0o600)
        key.symlink_to(tmp_path / "elsewhere.key")
    elif shape == "fifo":
        os.mkfifo(key, 0o600)
    else:
        key.mkdir()
    planted(out, ["precious.txt", "config.json"], known)
    r = run("materialize", str(src), str(out), "--config-only", "--force", "--verifier", "Qwen/Qwen3-8B")
    assert (out / "precious.txt").read_text() == "keep me"
    assert r.returncode == 2, r.stderr
    assert "manifest key" in r.stderr and "Traceback" not in r.stderr


# -- weight files ----------------------------------------------------------------------------------

def draft_with(tmp_path, name: str, make) -> object:
    src = tmp_path / "src"
    src.mkdir()
    (src / "config.json").write_text(json.dumps(fixture_config("dflash")))
    make(src / name)
    return src


def test_a_weight_link_out_of_the_draft_directory_is_refused_not_copied(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("not yours")
    src = draft_with(tmp_path, "model.safetensors", lambda p: p.symlink_to(secret))
    r = run("materialize", str(src), str(tmp_path / "out"), "--copy", "--verifier", "Qwen/Qwen3-8B")
    assert r.returncode == 2 and "outside the draft directory" in r.stderr, r.stderr
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").glob("*.safetensors"))


def test_a_shard_named_by_the_index_that_links_out_is_refused(tmp_path):
    src = write_draft(tmp_path / "src", fixture_config("dflash"), shards=2)
    shard = src / "model-00002-of-00002.safetensors"
    (tmp_path / "secret").write_bytes(shard.read_bytes())
    shard.unlink()
    shard.symlink_to(tmp_path / "secret")
    r = run("materialize", str(src), str(tmp_path / "out"), "--copy", "--verifier", "Qwen/Qwen3-8B")
    assert r.returncode == 2 and "outside the draft directory" in r.stderr, r.stderr


def test_a_weight_that_is_a_device_beside_a_real_one_is_refused(tmp_path):
    src = write_draft(tmp_path / "src", fixture_config("dflash"))
    (src / "b.safetensors").symlink_to("/dev/zero")
    r = run("materialize", str(src), str(tmp_path / "out"), "--copy", "--verifier", "Qwen/Qwen3-8B")
    assert r.returncode == 2 and "/dev/zero" in r.stderr, r.stderr


def test_a_weight_that_is_a_fifo_is_refused(tmp_path):
    src = write_draft(tmp_path / "src", fixture_config("dflash"))
    os.mkfifo(src / "x.safetensors")
    r = run("materialize", str(src), str(tmp_path / "out"), "--verifier", "Qwen/Qwen3-8B")
    assert r.returncode == 2 and "FIFO" in r.stderr, r.stderr


def test_a_link_inside_the_draft_directory_is_still_a_weight(tmp_path):
    src = write_draft(tmp_path / "src", fixture_config("dflash"))
    (src / "model.safetensors").rename(src / "real.bin")
    (src / "model.safetensors").symlink_to("real.bin")
    spec = specreg.load(src)
    done = spec.materialize(tmp_path / "out", weights="copy")
    assert (done.directory / "model.safetensors").read_bytes() == (src / "real.bin").read_bytes()


# -- names that end in a newline, terminal escapes --------------------------------------------------

def test_a_repo_id_ending_in_a_newline_is_bad_input_on_one_line(hub):
    r = run("show", "org/x\n")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().count("\n") == 0 and "org/x\\x0a" in r.stderr
    assert hub.count() == 0


def test_a_revision_ending_in_a_newline_never_reaches_the_hub(hub):
    r = run("show", "org/x", "--revision", "main\n")
    assert r.returncode == 2 and "not a valid revision" in r.stderr
    assert hub.count() == 0


@pytest.mark.parametrize("field", ["revision", "config_sha256"])
def test_the_catalog_refuses_a_hash_ending_in_a_newline(tmp_path, field):
    value = "a" * (40 if field == "revision" else 64) + "\n"
    reg = tmp_path / "registry"
    (reg / "org").mkdir(parents=True)
    (reg / "org" / "x.toml").write_text(f'id = "org/x"\nalgorithm = "eagle3"\nstatus = "pinned"\n{field} = {json.dumps(value)}\n'
                                        '\n[verifier]\nid = "org/v"\n')
    r = run("catalog", "check", "--registry", str(reg))
    assert r.returncode == 1 and f"$.{field}" in r.stderr


def test_show_escapes_terminal_controls_from_the_config(tmp_path):
    cfg = fixture_config("eagle3_generated")
    cfg["speculators_version"] = "0.9.0\x1b[31mRED"
    cfg["speculators_config"]["verifier"]["name_or_path"] = "org/v\x1b]0;pwned\x07\u202e"
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    r = run("show", str(path))
    assert "\x1b" not in r.stdout + r.stderr and "\x07" not in r.stdout and "\u202e" not in r.stdout
    assert "org/v\\x1b]0;pwned\\x07\\u202e" in r.stdout


def test_catalog_show_escapes_terminal_controls_from_the_entry(tmp_path):
    reg = tmp_path / "registry"
    (reg / "org").mkdir(parents=True)
    (reg / "org" / "x.toml").write_text('id = "org/x"\nalgorithm = "eagle3"\nstatus = "unpinned"\n'
                                        'notes = "fine\\u001b[2J\\u001b[Hcleared"\n\n[verifier]\nid = "org/v"\n')
    for args in (("catalog", "show", "org/x"), ("catalog", "list")):
        r = run(*args, "--registry", str(reg))
        assert r.returncode == 0, r.stderr
        assert "\x1b" not in r.stdout + r.stderr


# -- values that would allocate ---------------------------------------------------------------------

@pytest.mark.parametrize("n", [300_000_000, 10**30])
def test_a_huge_native_layer_count_is_refused_before_anything_is_built_from_it(n):
    """120 bytes of config once built a 300-million-entry layer list (2.3 GB) before the range check."""
    import tracemalloc

    cfg = json.loads((DATA_NATIVE / "zlab_dflash_qwen3_8b_fixture.json").read_text())
    cfg["num_hidden_layers"] = n
    tracemalloc.start()
    try:
        with pytest.raises(specreg.ConfigError, match=r"num_hidden_layers"):
            specreg.normalize(cfg)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * 2**20, f"{peak / 2**20:.0f} MiB allocated"


def test_a_lone_surrogate_in_a_passed_through_string_is_written_as_it_was(tmp_path):
    """JSON can carry "\\ud800"; UTF-8 cannot: materialize was exit 3 (UnicodeEncodeError)."""
    cfg = fixture_config("dflash")
    cfg["transformer_layer_config"]["note"] = "\ud800x"
    src = write_draft(tmp_path / "src", cfg)
    r = run("materialize", str(src), str(tmp_path / "out"), "--config-only", "--verifier", "Qwen/Qwen3-8B")
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "out" / "config.json").read_text())["note"] == "\ud800x"


def test_ctrl_c_is_one_line_and_exit_130(hub):
    """Ctrl-C printed a 25-line traceback."""
    import signal
    import subprocess
    import sys
    import time

    hub.add("org/slow", {"config.json": json.dumps(fixture_config("dflash")).encode()})
    hub.fault("config.json", "forever:slow:30")
    proc = subprocess.Popen([sys.executable, "-m", "specreg", "show", "org/slow"], stderr=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env={**os.environ, "SPECREG_HUB_DEADLINE": "60"},
                            preexec_fn=as_from_a_terminal)
    deadline = time.monotonic() + 30
    while hub.count() == 0 and time.monotonic() < deadline:  # until the request is in flight
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err.strip() == "interrupted: specreg show stopped"


# -- catalog files ------------------------------------------------------------------------------------

MINIMAL = 'id = "{id}"\nalgorithm = "eagle3"\nstatus = "unpinned"\n\n[verifier]\nid = "org/v"\n'


def registry_with(tmp_path, **files):
    reg = tmp_path / "registry"
    (reg / "org").mkdir(parents=True)
    for name, make in files.items():
        make(reg / "org" / f"{name}.toml")
    return reg


def test_two_entries_whose_ids_differ_only_in_case_are_one_repo(tmp_path):
    reg = tmp_path / "registry"
    for org in ("org", "Org"):
        (reg / org).mkdir(parents=True)
    (reg / "org" / "dup.toml").write_text(MINIMAL.format(id="org/dup"))
    (reg / "Org" / "Dup.toml").write_text(MINIMAL.format(id="Org/Dup"))
    r = run("catalog", "check", "--registry", str(reg))
    assert r.returncode == 1 and "case-insensitive" in r.stderr


def test_an_entry_file_that_links_out_of_the_catalog_is_refused(tmp_path):
    outside = tmp_path / "outside.toml"
    outside.write_text(MINIMAL.format(id="org/x"))
    reg = registry_with(tmp_path, x=lambda p: p.symlink_to(outside))
    r = run("catalog", "check", "--registry", str(reg))
    assert r.returncode == 1 and "outside the catalog directory" in r.stderr


@pytest.mark.parametrize("kind", ["fifo", "directory", "dangling link"])
def test_an_entry_path_that_is_not_a_file_is_reported_not_dropped(tmp_path, kind):
    make = {"fifo": lambda p: os.mkfifo(p), "directory": lambda p: p.mkdir(),
            "dangling link": lambda p: p.symlink_to(tmp_path / "registry" / "org" / "gone.toml")}[kind]
    reg = registry_with(tmp_path, x=make)
    r = run("catalog", "check", "--registry", str(reg))
    assert r.returncode == 1 and "x.toml" in r.stderr and "cannot read" in r.stderr, r.stderr


# -- counters -------------------------------------------------------------------------------------------

def test_counters_whose_label_sets_sum_to_infinity_are_refused_not_a_crash():
    """Two engines each at 1e308 (finite) sum to inf: int(inf) was an OverflowError (exit 3)."""
    from specreg.verify.counters import CounterError, from_prometheus

    text = "".join(f'vllm:spec_decode_{name}_total{{engine="{e}"}} 1e308\n'
                   for name in ("num_drafts", "num_draft_tokens", "num_accepted_tokens") for e in (0, 1))
    with pytest.raises(CounterError, match="sums to infinity"):
        from_prometheus(text)


# -- safetensors headers ----------------------------------------------------------------------------------

def header_file(path, header_text: str) -> None:
    raw = header_text.encode()
    path.write_bytes(len(raw).to_bytes(8, "little") + raw)


def local_verifier(tmp_path):
    folder = tmp_path / "verifier"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
                                                    "hidden_size": 4096, "num_hidden_layers": 36, "vocab_size": 151936}))
    return folder


@pytest.mark.parametrize("shape", ['["a"]', "[null]", "[1e400]", "[NaN]", "[{}]", "[-1]", "[1.5]", "[true]",
                                   "[" + ",".join(["1"] * 40) + "]"])
def test_a_hostile_tensor_shape_is_bad_input_naming_the_tensor(tmp_path, shape):
    src = tmp_path / "src"
    src.mkdir()
    (src / "config.json").write_text(json.dumps(fixture_config("dflash")))
    header_file(src / "model.safetensors", '{"fc.weight": {"dtype": "F16", "shape": ' + shape + ', "data_offsets": [0, 0]}}')
    r = run("check", str(src), "--verifier", str(local_verifier(tmp_path)))
    assert r.returncode == 2, r.stderr
    assert "fc.weight" in r.stderr and "shape" in r.stderr and "internal error" not in r.stderr


def test_a_deeply_nested_safetensors_header_is_bad_input(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "config.json").write_text(json.dumps(fixture_config("dflash")))
    header_file(src / "model.safetensors", '{"x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    r = run("check", str(src), "--verifier", str(local_verifier(tmp_path)))
    assert r.returncode == 2 and "internal error" not in r.stderr, r.stderr


# -- what report reads -------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def one_run(tmp_path_factory):
    """A real result directory (verify --server against the loopback server)."""
    from openai_server import OpenAIServer
    from verify_helpers import ENTRY, verify_args, write_rows

    root = tmp_path_factory.mktemp("one-run")
    reg = root / "registry"
    (reg / "org").mkdir(parents=True)
    (reg / "org" / "draft.toml").write_text(ENTRY)
    rows = write_rows(root / "gsm8k.jsonl")
    out = root / "results" / "org--draft"
    with OpenAIServer() as server:  # in-process; set up before the per-test environment, so it is given here
        done = run_in_process(*verify_args(server, reg, rows, out), env={
            "SPECREG_CACHE": str(root / "specreg-cache"), "SPECREG_VERIFY_IDLE_WAIT": "0"})
    assert done.returncode == 0, done.stderr
    return reg, out


def results_copy(one_run, tmp_path):
    import shutil

    reg, out = one_run
    results = tmp_path / "results"
    shutil.copytree(out.parent, results)
    return reg, results


RETYPES = {
    "started": 5, "model": "o/" + "x" * 300, "verdict": 7, "harness": [1], "statistics": "none",
    "statistics.acceptance_length": "2.8", "statistics.acceptance_length ": True, "statistics.al_interval": [2.5],
    "statistics.per_position": ["a"], "judgement": "x", "judgement.checks": [1], "baseline": 3, "environment": "x",
}


#: values of a result.json that once ended `report` in an internal error (exit 3)
RESULT_HOLES = {
    "a NUL byte in model": ("model", "org/\x00bad"),
    "a null AL": ("statistics.acceptance_length", None),
    "an error that is an object": ("error", {"why": "x"}),
    "a baseline AL that is a list": ("baseline.acceptance_length", [2.8]),
}
MALFORMED = [(field.strip(), value) for field, value in RETYPES.items()] + list(RESULT_HOLES.values())


@pytest.mark.parametrize("field, value", MALFORMED, ids=[*RETYPES, *RESULT_HOLES])
def test_a_malformed_result_is_skipped_with_a_warning_and_the_report_goes_on(one_run, tmp_path, field, value):
    reg, results = results_copy(one_run, tmp_path)
    bad = results / "org--bad"
    bad.mkdir()
    doc = json.loads((results / "org--draft" / "result.json").read_text())
    doc["model"] = "org/bad"
    node, *rest = field.split(".")
    if rest:
        doc.setdefault(node, {})[rest[0]] = value
    else:
        doc[node] = value
    (bad / "result.json").write_text(json.dumps(doc))
    r = run("report", str(results), "--out", str(tmp_path / "site"), "--registry", str(reg))
    assert r.returncode == 0, r.stderr
    assert "skipped org--bad/result.json" in r.stderr
    assert "<td class='verdict'>pass</td>" in (tmp_path / "site" / "index.html").read_text()


def test_history_rows_with_a_text_or_blob_al_are_skipped(one_run, tmp_path):
    import sqlite3

    reg, results = results_copy(one_run, tmp_path)
    from specreg.verify.outputs import HISTORY_COLUMNS, HISTORY_INSERT

    with sqlite3.connect(results / "history.sqlite") as db:
        row = list(db.execute(f"SELECT {', '.join(HISTORY_COLUMNS)} FROM runs"))[0]
        db.execute(HISTORY_INSERT, (*row[:2], "2030-01-01", row[3], "high", *row[5:]))
        db.execute(HISTORY_INSERT, (*row[:2], "2030-01-02", row[3], b"\x00", *row[5:]))
    r = run("report", str(results), "--out", str(tmp_path / "site"), "--registry", str(reg))
    assert r.returncode == 0, r.stderr
    assert "2 malformed row(s) skipped" in r.stderr


def test_a_history_whose_runs_is_a_recursive_view_is_given_up(one_run, tmp_path):
    import sqlite3

    reg, results = results_copy(one_run, tmp_path)
    (results / "history.sqlite").unlink()
    with sqlite3.connect(results / "history.sqlite") as db:
        db.execute("CREATE VIEW runs AS WITH RECURSIVE n(model, dataset, started, verdict, acceptance_length, "
                   "draft_acceptance_rate, vllm_version, gpu, result) AS (SELECT 'a', 'b', 'c', 'd', 1, 1, 'v', 'g', 'r' "
                   "UNION ALL SELECT * FROM n) SELECT * FROM n")
    r = run_specreg("report", str(results), "--out", str(tmp_path / "site"), "--registry", str(reg), timeout=120)
    assert r.returncode == 0, r.stderr
    assert "history history.sqlite not read" in r.stderr


@pytest.mark.parametrize("name, limit", [("result.json", 8), ("per_position.png", 16)])
def test_an_oversized_result_file_is_not_read_whole(one_run, tmp_path, name, limit):
    reg, results = results_copy(one_run, tmp_path)
    with open(results / "org--draft" / name, "r+b") as fh:
        fh.truncate(limit * 2**20 + 1)  # sparse: no disk, but too large to read
    r = run("report", str(results), "--out", str(tmp_path / "site"), "--registry", str(reg))
    assert r.returncode == 0, r.stderr
    if name == "result.json":
        assert "larger than 8 MiB" in r.stderr
    else:
        assert not (tmp_path / "site" / "models" / "org--draft-per-position.png").exists()


def test_a_history_that_is_a_link_is_not_followed(tmp_path):
    """sqlite followed a history.sqlite link and created the file it pointed to, outside the run."""
    from openai_server import OpenAIServer
    from verify_helpers import ENTRY, verify_args, write_rows

    reg = tmp_path / "registry"
    (reg / "org").mkdir(parents=True)
    (reg / "org" / "draft.toml").write_text(ENTRY)
    rows = write_rows(tmp_path / "gsm8k.jsonl")
    out = tmp_path / "results" / "org--draft"
    out.parent.mkdir(parents=True)
    (out.parent / "history.sqlite").symlink_to(tmp_path / "elsewhere.sqlite")
    with OpenAIServer() as server:
        r = run_specreg(*verify_args(server, reg, rows, out), timeout=120)
    assert r.returncode == 0, r.stderr
    assert not (tmp_path / "elsewhere.sqlite").exists()
    assert "not added to the history" in r.stderr and (out / "result.json").is_file()


# -- every config fetch is capped ------------------------------------------------------------------------

BIG_CONFIG = b'{"pad": "' + b"x" * (5 * 1024 * 1024) + b'"}'


def test_the_verifier_config_of_the_pre_flight_is_capped(hub, tmp_path):
    """A 300 MiB verifier config.json was downloaded into the HF cache and kept."""
    hub.add("org/huge-verifier", {"config.json": BIG_CONFIG})
    src = write_draft(tmp_path / "src", fixture_config("dflash"))
    r = run("check", str(src), "--verifier", "org/huge-verifier", "--no-weights")
    assert r.returncode == 2 and "over the 4194304-byte limit" in r.stderr, r.stderr
    assert hub.bytes_sent("config.json") == 0


def test_catalog_pin_is_capped(hub, tmp_path):
    hub.add("org/huge", {"config.json": BIG_CONFIG})
    reg = tmp_path / "registry"
    (reg / "org").mkdir(parents=True)
    (reg / "org" / "huge.toml").write_text(MINIMAL.format(id="org/huge"))
    r = run("catalog", "pin", "org/huge", "--registry", str(reg))
    assert r.returncode == 2 and "over the 4194304-byte limit" in r.stderr, r.stderr
    assert hub.bytes_sent("config.json") == 0


# -- the file system says no ---------------------------------------------------------------------------

@pytest.mark.parametrize("shape", ["link to an empty directory", "dangling link", "regular file"])
def test_a_target_that_is_not_a_real_directory_is_one_line_exit_2(tmp_path, shape):
    src = write_draft(tmp_path / "src", fixture_config("dflash"))
    target = tmp_path / "out"
    if shape == "link to an empty directory":
        (tmp_path / "empty").mkdir()
        target.symlink_to(tmp_path / "empty", target_is_directory=True)
    elif shape == "dangling link":
        target.symlink_to(tmp_path / "gone")
    else:
        target.write_text("mine")
    r = run("materialize", str(src), str(target), "--config-only", "--verifier", "Qwen/Qwen3-8B")
    assert r.returncode == 2 and "internal error" not in r.stderr, r.stderr
    assert str(target) in r.stderr
    assert not (tmp_path / "gone").exists() and (shape != "link to an empty directory"
                                                 or list((tmp_path / "empty").iterdir()) == [])


def test_an_unusable_specreg_cache_is_one_line_naming_it(tmp_path):
    src = write_draft(tmp_path / "src", fixture_config("dflash"))
    (tmp_path / "a-file").write_text("x")
    r = run("materialize", str(src), str(tmp_path / "out"), "--config-only", "--verifier", "Qwen/Qwen3-8B",
            env={"SPECREG_CACHE": str(tmp_path / "a-file" / "cache")})
    assert r.returncode == 2 and "internal error" not in r.stderr, r.stderr
    assert str(tmp_path / "a-file") in r.stderr and "not a directory" in r.stderr.lower()


# -- catalog values verify would refuse --------------------------------------------------------------------

HARNESS_ENTRY = ('id = "org/x"\nalgorithm = "eagle3"\nstatus = "unpinned"\n\n[verifier]\nid = "org/v"\n\n'
                 '[[baselines]]\nkind = "published"\nsource = "s"\n\n[baselines.harness]\ndataset = "gsm8k"\n{harness}\n'
                 '[baselines.metrics.acceptance_length]\nvalue = 2.0\n')


@pytest.mark.parametrize("line, path", [
    ("temperature = 200.0", "harness.temperature"),
    ("seed = -1", "harness.seed"),
    ("max_tokens = 2000000000", "harness.max_tokens"),
    ('\n[baselines.harness.prompt]\ntemplate = "{question:>1500000000}"', "harness.prompt.template"),
    ('\n[baselines.harness.prompt]\ntemplate = "{question.__class__}"', "harness.prompt.template"),
])
def test_catalog_check_refuses_a_harness_value_verify_would_refuse(tmp_path, line, path):
    reg = tmp_path / "registry"
    (reg / "org").mkdir(parents=True)
    (reg / "org" / "x.toml").write_text(HARNESS_ENTRY.format(harness=line))
    r = run("catalog", "check", "--registry", str(reg))
    assert r.returncode == 1 and f"$.baselines[0].{path}" in r.stderr, r.stderr


def test_verify_refuses_a_template_with_a_format_spec_before_allocating(tmp_path):
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"question": "q"}\n')
    r = run("verify", str(write_draft(tmp_path / "d", fixture_config("eagle3_generated"))), "--server",
            "http://127.0.0.1:9", "--dataset", "gsm8k", "--dataset-file", str(rows), "--template",
            "{question:>1500000000}")
    assert r.returncode == 2 and "not a plain field" in r.stderr and "MemoryError" not in r.stderr, r.stderr


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

    proc = subprocess.Popen([sys.executable, "-m", "specreg", "materialize", str(src), str(out), "--copy",
                             "--verifier", "Qwen/Qwen3-8B", "-q", *extra], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=dict(os.environ))
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline and not when(out):
        time.sleep(0.002)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)


def copying(out):
    """A weight is being copied into the write's stage folder (specreg/dirwrite.py)."""
    return out.is_dir() and any((p / "files" / "model.safetensors").exists() for p in out.iterdir()
                                if p.name.startswith(".specreg-stage-"))


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


# -- bytes vLLM's reader refuses ------------------------------------------------------------------------------

def test_a_config_with_a_byte_order_mark_is_named_and_written_without_it(tmp_path):
    """transformers reads config.json as `json.loads(open(f, encoding="utf-8").read())`, which refuses a BOM
    (transformers 5.19.0, configuration_utils.py `PretrainedConfig._dict_from_json_file`; the engine tier
    shows vLLM failing on such a file); specreg read it and said nothing."""
    src = write_draft(tmp_path / "src", fixture_config("eagle3_generated"))
    (src / "config.json").write_bytes(b"\xef\xbb\xbf" + (src / "config.json").read_bytes())
    with pytest.raises(json.JSONDecodeError, match="BOM"):
        json.loads((src / "config.json").read_text(encoding="utf-8"))  # what transformers does
    spec = specreg.load(src)
    assert "config-byte-order-mark" in [f.code for f in spec.served_differently]
    r = run("show", str(src))
    assert "config-byte-order-mark" in r.stdout
    done = spec.materialize(tmp_path / "out", weights="none")
    json.loads((done.directory / "config.json").read_text(encoding="utf-8"))  # transformers can read it


# -- every reader, every file-system shape ---------------------------------------------------------------------

SHAPES = ["regular", "empty", "link inside", "link outside", "dangling link", "link loop", "fifo", "directory"]


def make_shape(root, name: str, shape: str, content: bytes) -> None:
    """`root/name` as `shape`; "link outside" points at a file of the same content outside `root`."""
    path = root / name
    if shape == "regular":
        path.write_bytes(content)
    elif shape == "empty":
        path.write_bytes(b"")
    elif shape == "link inside":
        (root / f"real-{name}").write_bytes(content)
        path.symlink_to(f"real-{name}")
    elif shape == "link outside":
        outside = root.parent.parent / f"outside-{name}"
        outside.write_bytes(content)
        path.symlink_to(outside)
    elif shape == "dangling link":
        path.symlink_to(root / "gone")
    elif shape == "link loop":
        path.symlink_to(path)
    elif shape == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()


def readers():
    """(name, file name, content, read(root) -> None): each reader of a user- or remote-supplied file."""
    from specreg.entries.lookup import read_catalog
    from specreg.sources.files import read_source
    from specreg.verify.report import _results
    from specreg.vllm.draft_weights import _local_weights
    from weights import safetensors_bytes, tensors

    config = json.dumps(fixture_config("dflash")).encode()
    entry = MINIMAL.format(id="org/x").encode()

    def config_reader(root):
        read_source(str(root / "config.json"))

    def weights_reader(root):
        _local_weights(root)

    def catalog_reader(root):
        _, problems = read_catalog(root.parent)  # problems are collected, not raised
        if problems:
            raise ValueError(problems[0][1].message)

    def report_reader(root):
        warnings: list[str] = []
        _results(root, warnings)  # a file it will not read is a warning on the page
        if warnings:
            raise ValueError(warnings[0])

    return [("config", "config.json", config, config_reader),
            ("weights", "model.safetensors", safetensors_bytes(tensors(fc__weight=(2, 2))), weights_reader),
            ("catalog entry", "x.toml", entry, catalog_reader),
            ("result", "result.json", b'{"model": "org/x", "verdict": "pass"}', report_reader)]


@pytest.mark.parametrize("reader", [r[0] for r in readers()])
@pytest.mark.parametrize("shape", SHAPES)
def test_every_reader_meets_every_file_shape_with_a_clear_outcome(tmp_path, reader, shape):
    """Each reader of an untrusted file either reads a regular file (or a link to one inside its root)
    or refuses with specreg's error: never another exception, never a read of what a link points to
    outside the root, never a hang on a FIFO (the test would time out)."""
    name, filename, content, read = next(r for r in readers() if r[0] == reader)
    root = tmp_path / "top" / "org"
    root.mkdir(parents=True)
    make_shape(root, filename, shape, content)
    try:
        read(root)
        outcome = "read"
    except (specreg.SpecregError, ValueError) as exc:
        outcome = f"refused: {exc}"
    if shape == "link outside" and reader in ("weights", "catalog entry", "result"):
        # a file beside the source, in the catalog or in a results tree; the config itself is the
        # path the user named, so a link there is theirs to follow
        assert outcome.startswith("refused"), outcome
    if shape in ("fifo", "directory", "dangling link", "link loop") and reader in ("config", "weights"):
        assert outcome.startswith("refused"), outcome


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


def test_a_disk_that_fills_up_after_measuring_does_not_lose_the_measurement(tmp_path, monkeypatch, capsys):
    """verify on a full disk lost the measurement: the result is printed whole before the error."""
    import errno

    from openai_server import OpenAIServer
    from specreg.cli.main import main
    from specreg.verify import outputs
    from verify_helpers import ENTRY, verify_args, write_rows

    reg = tmp_path / "registry"
    (reg / "org").mkdir(parents=True)
    (reg / "org" / "draft.toml").write_text(ENTRY)
    rows = write_rows(tmp_path / "gsm8k.jsonl")

    def full(*_args, **_kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "out" / "result.json"))

    monkeypatch.setattr(outputs, "write_all", full)
    with OpenAIServer() as server:
        code = main(list(verify_args(server, reg, rows, tmp_path / "out")))
    err = capsys.readouterr().err
    assert code == 2 and "No space left on device" in err and "no space left" in err.lower()
    line = next(x for x in err.splitlines() if x.startswith("{"))
    assert json.loads(line)["statistics"]["acceptance_length"] == pytest.approx(2.8)


TARGET_SHAPES = ["absent", "empty directory", "regular file", "link to a directory", "dangling link", "fifo"]


def make_target(path, shape: str) -> None:
    if shape == "empty directory":
        path.mkdir()
    elif shape == "regular file":
        path.write_text("mine")
    elif shape == "link to a directory":
        (path.parent / "linked").mkdir()
        path.symlink_to(path.parent / "linked", target_is_directory=True)
    elif shape == "dangling link":
        path.symlink_to(path.parent / "gone")
    elif shape == "fifo":
        os.mkfifo(path)


@pytest.mark.parametrize("writer", ["materialize", "report"])
@pytest.mark.parametrize("shape", TARGET_SHAPES)
def test_every_writer_meets_every_target_shape_without_touching_what_is_not_its_own(tmp_path, writer, shape):
    """A writer writes into an absent or real (empty) directory, and refuses anything else in one line,
    exit 2, leaving it, and whatever a link points to, as it was."""
    target = tmp_path / "target"
    make_target(target, shape)
    if writer == "materialize":
        src = write_draft(tmp_path / "src", fixture_config("dflash"))
        r = run("materialize", str(src), str(target), "--config-only", "--verifier", "Qwen/Qwen3-8B")
    else:
        (tmp_path / "results").mkdir()
        r = run("report", str(tmp_path / "results"), "--out", str(target))
    if shape in ("absent", "empty directory"):
        assert r.returncode == 0, r.stderr
        assert target.is_dir() and not target.is_symlink()
        return
    assert r.returncode == 2 and "internal error" not in r.stderr and r.stderr.count("\n") <= 3, r.stderr
    if shape == "regular file":
        assert target.read_text() == "mine"
    elif shape == "link to a directory":
        assert target.is_symlink() and list((tmp_path / "linked").iterdir()) == []
    elif shape == "dangling link":
        assert target.is_symlink() and not (tmp_path / "gone").exists()
    else:
        import stat

        assert stat.S_ISFIFO(os.lstat(target).st_mode)


@pytest.mark.parametrize("shape", ["fifo", "link outside"])
def test_check_reads_weight_headers_by_the_same_rule_as_materialize(tmp_path, shape):
    """check opened a FIFO x.safetensors and waited for ever; it read headers through links out of the draft."""
    src = write_draft(tmp_path / "src", fixture_config("dflash"))
    if shape == "fifo":
        os.mkfifo(src / "x.safetensors")
    else:
        (tmp_path / "elsewhere.safetensors").write_bytes((src / "model.safetensors").read_bytes())
        (src / "x.safetensors").symlink_to(tmp_path / "elsewhere.safetensors")
    r = run("check", str(src), "--verifier", str(local_verifier(tmp_path)))
    assert r.returncode == 2 and "x.safetensors" in r.stderr, r.stderr


def test_a_verifier_config_that_is_a_fifo_is_refused_not_waited_on(tmp_path):
    """read_config opened whatever it was given: a FIFO verifier config.json made check wait for ever."""
    src = write_draft(tmp_path / "src", fixture_config("dflash"))
    verifier = tmp_path / "verifier"
    verifier.mkdir()
    os.mkfifo(verifier / "config.json")
    r = run("check", str(src), "--verifier", str(verifier), "--no-weights")
    assert r.returncode == 2 and "a FIFO, not a regular file" in r.stderr, r.stderr


def _result_paths(value, path=()):
    """Every key path of a result, with the first item of each list standing for the others."""
    if path:
        yield path
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _result_paths(v, (*path, k))
    elif isinstance(value, list) and value:
        yield from _result_paths(value[0], (*path, 0))


def test_every_field_of_a_result_retyped_is_shown_or_skipped_never_an_internal_error(one_run, tmp_path):
    """Each field of a real result.json set to an object, a list, a string, a bool or null: report
    builds the page (the result shown or skipped with a warning), with no other exception."""
    import shutil

    from specreg.verify import report

    reg, results = results_copy(one_run, tmp_path)
    for db in results.rglob("history.sqlite"):  # the result file alone is read
        db.unlink()
    target = results / "org--draft" / "result.json"
    doc = json.loads(target.read_text())
    wrong = []
    for path in _result_paths(doc):
        for value in ({"x": 1}, [1], "1", True, None):
            changed = json.loads(json.dumps(doc))
            node = changed
            for key in path[:-1]:
                node = node[key]
            node[path[-1]] = value
            target.write_text(json.dumps(changed))
            shutil.rmtree(tmp_path / "site", ignore_errors=True)
            try:
                report.build(results, tmp_path / "site", registry=str(reg), warnings=[])
            except Exception as exc:  # noqa: BLE001 - the point: any exception is a bug
                wrong.append((path, value, f"{type(exc).__name__}: {exc}"))
    assert wrong == []
