"""Hub faults, concurrency and security, against the loopback Hub (never mocks of huggingface_hub)."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

import specreg
from conftest import DATA, fixture_config

REPO = "org/draft"
CONFIG = (DATA / "speculators" / "dflash.json").read_bytes()
TOKEN = "hf_SECRETtoken0123456789abcdef"


@pytest.fixture(autouse=True)
def _fast_retries(monkeypatch):
    monkeypatch.setenv("SPECREG_HUB_RETRIES", "2")
    monkeypatch.setenv("SPECREG_HUB_BACKOFF", "0.01")


@pytest.fixture
def no_resume_pause(monkeypatch):
    """huggingface_hub sleeps 1 s before each of its 5 resume attempts (file_download.http_get): the
    attempts are what is tested, not the pauses."""
    import time
    import types

    from huggingface_hub import file_download

    fast = types.SimpleNamespace(**{name: getattr(time, name) for name in dir(time) if not name.startswith("_")})
    fast.sleep = lambda _seconds: None
    monkeypatch.setattr(file_download, "time", fast)


def snapshot_files(tmp_path):
    cache = tmp_path / "hf-cache"
    return sorted(str(p.relative_to(cache)) for p in cache.rglob("*") if p.is_file() and "snapshots" in p.parts)


def gets(hub, suffix="config.json"):
    return [p for m, p, _ in hub.requests if m == "GET" and p.endswith(suffix)]


# -- 404s and gated ---------------------------------------------------------------------------------

def test_missing_repo_file_and_revision_are_one_clear_error_each(hub):
    hub.add(REPO, {"README.md": b"no config"})
    with pytest.raises(specreg.RepoNotFoundError, match="no repository org/nope"):
        specreg.load("org/nope")
    with pytest.raises(specreg.FileNotFoundOnHubError, match="has no config.json"):
        specreg.load(REPO)
    with pytest.raises(specreg.RevisionNotFoundError, match="has no revision 'v9'"):
        specreg.load(f"{REPO}@v9")


def test_gated_repo_without_and_with_a_wrong_token(hub, monkeypatch):
    hub.add(REPO, {"config.json": CONFIG}, gated=True)
    hub.gated_token = "hf_the_right_one"
    with pytest.raises(specreg.GatedRepoError, match="gated"):
        specreg.load(REPO)  # 401: no token
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    with pytest.raises(specreg.GatedRepoError) as err:
        specreg.load(REPO)  # 403: a token without access
    assert TOKEN not in str(err.value)
    monkeypatch.setenv("HF_TOKEN", "hf_the_right_one")
    assert specreg.load(REPO).method == "dflash"


# -- transient failures: retried, then the cache ---------------------------------------------------

@pytest.mark.parametrize("status", [500, 502, 503, 504])
def test_transient_failures_are_retried_until_success(hub, status):
    hub.add(REPO, {"config.json": CONFIG})
    hub.fault("/config.json", status, status, method="GET")  # huggingface_hub does not retry these on GET
    spec = specreg.load(REPO)
    assert spec.method == "dflash"
    assert "hub-cached-copy" not in [f.code for f in spec.findings]
    assert len(gets(hub)) == 3


def test_a_rate_limited_head_is_retried_by_huggingface_hub(hub):
    hub.add(REPO, {"config.json": CONFIG})
    hub.fault("/config.json", 429, method="HEAD")
    assert specreg.load(REPO).method == "dflash"


def test_persistent_5xx_without_a_cached_copy_is_one_error(hub, tmp_path):
    hub.add(REPO, {"config.json": CONFIG})
    hub.fault("/config.json", "forever:503", method="GET")
    with pytest.raises(specreg.HubError, match=r"HTTP 503 .*\(tried 3 times\)"):
        specreg.load(REPO)
    assert snapshot_files(tmp_path) == []


def test_persistent_5xx_with_a_cached_copy_falls_back_with_a_finding(hub):
    hub.add(REPO, {"config.json": CONFIG})
    old = specreg.load(REPO)
    hub.add(REPO, {"config.json": CONFIG.replace(b'"0.9.0"', b'"0.9.1"')})  # main moves on
    hub.fault("/config.json", "forever:503", method="GET")
    spec = specreg.load(REPO)
    f = next(f for f in spec.findings if f.code == "hub-cached-copy")
    assert f.severity == "warning" and "HTTP 503" in f.message and "cached copy" in f.message
    assert spec.origin.sha256 == old.origin.sha256  # the copy, honestly labelled


def test_a_connection_cut_mid_body_leaves_no_corrupt_file(hub, tmp_path, monkeypatch, no_resume_pause):
    monkeypatch.setenv("SPECREG_HUB_RETRIES", "0")  # huggingface_hub's own resume attempts suffice here
    hub.add(REPO, {"config.json": CONFIG})
    hub.fault("/config.json", "forever:cut:100", method="GET")  # huggingface_hub resumes, we retry: all cut
    with pytest.raises(specreg.HubError, match="connection failed"):
        specreg.load(REPO)
    assert snapshot_files(tmp_path) == []  # nothing half-written where the cache serves files from
    hub.faults.clear()
    spec = specreg.load(REPO)  # and the next try gets the whole file (resumed or not, byte-exact)
    assert spec.method == "dflash"
    cached = next((tmp_path / "hf-cache").rglob("snapshots/*/config.json"))
    assert cached.read_bytes() == CONFIG


def test_a_cut_then_success_is_retried(hub):
    hub.add(REPO, {"config.json": CONFIG})
    hub.fault("/config.json", ("cut", 10), method="GET")
    assert specreg.load(REPO).method == "dflash"


def test_a_server_slower_than_the_timeout(hub, monkeypatch, tmp_path, no_resume_pause):
    from huggingface_hub import constants

    # what HF_HUB_DOWNLOAD_TIMEOUT sets when huggingface_hub is imported (whole seconds there)
    monkeypatch.setattr(constants, "HF_HUB_DOWNLOAD_TIMEOUT", 0.3)
    monkeypatch.setenv("SPECREG_HUB_RETRIES", "0")
    hub.add(REPO, {"config.json": CONFIG})
    hub.fault("/config.json", "forever:slow:2.5", method="GET")
    with pytest.raises(specreg.HubError) as caught:
        specreg.load(REPO)
    assert "timed out" in str(caught.value) or "connection failed" in str(caught.value), caught.value
    assert snapshot_files(tmp_path) == []


def test_an_invalid_json_body_is_a_config_error(hub):
    hub.add(REPO, {"config.json": b'{"speculators_model_type": "dflash",'})
    with pytest.raises(specreg.ConfigError, match="invalid JSON"):
        specreg.load(REPO)


def test_a_body_over_the_size_limit_is_refused_before_it_is_read(hub):
    big = b'{"pad": "' + b"x" * (5 * 1024 * 1024) + b'"}'
    hub.add(REPO, {"config.json": big})
    with pytest.raises(specreg.HubError, match="over the 4194304-byte limit"):
        specreg.load(REPO)
    assert gets(hub) == []  # only the metadata (HEAD) was asked for
    assert hub.bytes_sent("config.json") == 0


# -- concurrency -----------------------------------------------------------------------------------

def test_eight_processes_loading_one_uncached_model_download_it_once(hub, tmp_path):
    hub.add(REPO, {"config.json": CONFIG})
    for _ in range(8):
        hub.fault("/config.json", ("slow", 0.3), method="GET")  # keep the downloads overlapping
    code = f"import specreg; s = specreg.load({REPO!r}); print(s.method, s.origin.sha256)"
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=dict(os.environ)) for _ in range(8)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 8, [e for _, e in outs]
    assert len({o for o, _ in outs}) == 1 and outs[0][0].startswith("dflash ")
    assert len(gets(hub)) == 1


# -- security --------------------------------------------------------------------------------------

PLANTED = """
import pathlib
pathlib.Path({mark!r}).write_text("repository code ran")
"""


def test_repository_code_is_never_run_locally_or_from_the_hub(hub, tmp_path):
    mark = tmp_path / "MARK"
    cfg = json.loads(CONFIG)
    cfg["auto_map"] = {"AutoConfig": "config.Evil", "AutoModel": "modeling.Evil"}
    draft = tmp_path / "draft"
    draft.mkdir()
    (draft / "config.json").write_text(json.dumps(cfg))
    for name in ("config.py", "modeling.py", "__init__.py"):
        (draft / name).write_text(PLANTED.format(mark=str(mark)))
    hub.add(REPO, {"config.json": json.dumps(cfg).encode(),
                   "config.py": PLANTED.format(mark=str(mark)).encode()})
    code = textwrap.dedent(f"""
        import sys, specreg
        sys.path.insert(0, {str(draft)!r})
        for source in ({str(draft)!r}, {REPO!r}):
            spec = specreg.load(source)
            spec.materialize({str(tmp_path / 'out')!r} + str(len(source)), weights="none")
        assert "config" not in sys.modules and "modeling" not in sys.modules
        print("ok")
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=dict(os.environ))
    assert r.stdout.strip() == "ok", r.stderr
    assert not mark.exists()
    assert not any(p.suffix == ".py" for p in tmp_path.rglob("out*/*"))
    assert [p for _, p, _ in hub.requests if p.endswith(".py")] == []


@pytest.mark.parametrize("source", [
    "org/../etc", "../../etc/passwd", "org/name/extra", "org/na me", "org/name@../../x", "org/name@main\nx",
    "-org/name", "org/name@", "org/" + "x" * 200, "org/name@v1@v2",
])
def test_repo_ids_and_revisions_are_validated_before_any_request(hub, source):
    with pytest.raises(specreg.ConfigError):
        specreg.load(source)
    assert hub.requests == []


def test_tokens_never_appear_in_errors_logs_or_result_files(hub, tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    hub.add(REPO, {"config.json": CONFIG, "model.safetensors": b"\0" * 16})
    hub.add("org/gated", {"config.json": CONFIG}, gated=True)
    hub.gated_token = "hf_other"
    caplog.set_level("DEBUG")
    seen = []
    for source in ("org/gated", "org/missing", f"{REPO}@nope"):
        with pytest.raises(specreg.SpecregError) as err:
            specreg.load(source)
        seen.append(str(err.value))
    spec = specreg.load(REPO)
    out = spec.materialize(tmp_path / "out")
    seen += [spec.to_json(), (out.directory / "specreg.json").read_text(), caplog.text]
    r = subprocess.run([sys.executable, "-m", "specreg", "show", "org/gated"], capture_output=True, text=True,
                       env=dict(os.environ), timeout=60)
    seen += [r.stdout, r.stderr]
    assert r.returncode == 2
    assert all(TOKEN not in text for text in seen)
    assert any("Bearer " + TOKEN == h.get("authorization") for _, _, h in hub.requests
               for h in [{k.lower(): v for k, v in h.items()}])  # it was sent, to the Hub only


def test_a_hub_failure_while_materializing_leaves_the_directory_untouched(hub, tmp_path):
    hub.add(REPO, {"config.json": CONFIG, "model.safetensors": b"\0" * 64})
    spec = specreg.load(REPO)
    hub.fault("/model.safetensors", "forever:503", method="GET")
    with pytest.raises(specreg.HubError, match="HTTP 503"):
        spec.materialize(tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert not [p for p in (tmp_path / "hf-cache").rglob("snapshots/*/model.safetensors")]


@pytest.mark.parametrize(("header", "value", "words"), [
    ("ETag", '"/tmp/specreg-etag-escape"', "not a content hash"),
    ("ETag", '"../../specreg-etag-escape"', "not a content hash"),
    ("X-Repo-Commit", "../..", "not a 40-hex commit"),
])
def test_a_hub_answer_that_would_place_a_file_outside_the_cache_is_refused(hub, tmp_path, header, value, words):
    import subprocess
    import sys

    hub.add("org/hostile", {"config.json": json.dumps(fixture_config("dflash")).encode()})
    hub.override = {header: value}
    out = subprocess.run([sys.executable, "-m", "specreg", "show", "org/hostile"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 2, out.stderr
    assert words in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert not os.path.exists("/tmp/specreg-etag-escape")
    cache = tmp_path / "hf-cache"
    assert not (cache.parent / "specreg-etag-escape").exists()


# -- concurrent writers of one directory --------------------------------------------------------------

def _sources(tmp_path, n):
    """n distinct local drafts (different block sizes, so each writes a different config)."""
    from weights import write_draft

    out = []
    for i in range(n):
        cfg = fixture_config("dflash")
        cfg["block_size"] = 16 + i
        cfg["speculators_config"]["proposal_methods"][0]["speculative_tokens"] = 15 + i
        out.append(write_draft(tmp_path / f"src{i}", cfg))
    return out


def _one_whole_draft(directory):
    """DIR holds exactly one draft: config.json and specreg.json from the same source, no temp files."""
    import hashlib

    names = sorted(p.name for p in directory.iterdir())
    assert not [n for n in names if "specreg-tmp" in n or "specreg-old" in n], names
    manifest = json.loads((directory / "specreg.json").read_text())
    source_config = json.loads(open(manifest["source"]["path"]).read())
    written = json.loads((directory / "config.json").read_text())
    assert written["dflash_config"]["target_layer_ids"] == [1, 9, 17, 25, 33]
    # config.json and specreg.json from one writer: the config is the one the manifest's source plans
    from specreg.vllm.vllm_config import plain_path_config

    assert written == json.loads(json.dumps(plain_path_config(specreg.load(manifest["source"]["path"]))[0]))
    assert manifest["speculative_config"]["num_speculative_tokens"] == source_config["block_size"] - 1
    assert hashlib.sha256(open(manifest["source"]["path"], "rb").read()).hexdigest() == manifest["source"]["sha256"]
    assert sorted(manifest["files"]) == sorted(n for n in names)


#: trials per concurrency test: a quick count by default, the issue's 50 with `pytest -m stress`
TRIALS = [pytest.param(10, id="10"), pytest.param(50, id="50", marks=pytest.mark.stress)]


@pytest.mark.parametrize("trials", TRIALS)
def test_eight_threads_writing_one_dir_leave_one_whole_draft_every_time(tmp_path, trials):
    from concurrent.futures import ThreadPoolExecutor

    sources = _sources(tmp_path, 8)
    specs = [specreg.load(s) for s in sources]
    for trial in range(trials):
        target = tmp_path / f"out{trial}"
        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(lambda s, target=target: _attempt(lambda: s.materialize(target, weights="none", force=True)),
                                    specs))
        assert all(r is None for r in results), results  # with --force every writer succeeds, in turn
        _one_whole_draft(target)


def _attempt(call):
    try:
        call()
        return None
    except Exception as exc:  # noqa: BLE001 - reported by the assertion
        return repr(exc)


@pytest.mark.parametrize("trials", [pytest.param(5, id="5"), pytest.param(50, id="50", marks=pytest.mark.stress)])
def test_eight_processes_writing_one_empty_dir_leave_one_whole_draft(tmp_path, trials):
    import subprocess
    import sys

    sources = _sources(tmp_path, 8)
    for trial in range(trials):
        target = tmp_path / f"out{trial}"
        procs = [subprocess.Popen([sys.executable, "-m", "specreg", "materialize", str(s), str(target), "--config-only"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for s in sources]
        codes = [p.wait(timeout=120) for p in procs]
        assert codes.count(0) == 1 and codes.count(2) == 7, codes  # one writes; the rest find it not empty
        _one_whole_draft(target)


@pytest.mark.parametrize("trials", [pytest.param(3, id="3"), pytest.param(50, id="50", marks=pytest.mark.stress)])
def test_eight_processes_forcing_two_drafts_into_one_dir_leave_one_whole_draft(tmp_path, trials):
    import subprocess
    import sys

    sources = _sources(tmp_path, 2)
    for trial in range(trials):
        target = tmp_path / f"out{trial}"
        procs = [subprocess.Popen([sys.executable, "-m", "specreg", "materialize", str(sources[i % 2]), str(target),
                                   "--config-only", "--force"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  text=True) for i in range(8)]
        codes = [p.wait(timeout=120) for p in procs]
        assert codes == [0] * 8, [p.stderr.read() for p in procs]  # every writer, in turn
        _one_whole_draft(target)


def test_materializing_a_draft_into_its_own_directory_is_refused(tmp_path):
    import subprocess
    import sys

    (src,) = _sources(tmp_path, 1)
    before = (src / "config.json").read_bytes()
    out = subprocess.run([sys.executable, "-m", "specreg", "materialize", str(src), str(src), "--config-only",
                          "--force"], capture_output=True, text=True)
    assert out.returncode == 2 and "is the draft's own directory" in out.stderr
    assert (src / "config.json").read_bytes() == before


# -- every wait bounded ------------------------------------------------------------------------------

def test_the_default_deadline_ends_a_hostile_fetch_within_two_minutes(monkeypatch):
    from specreg.sources import hub as hubmod

    monkeypatch.delenv("SPECREG_HUB_DEADLINE", raising=False)
    assert hubmod.deadline() == 60.0  # retries included; the drip and hang tests below use 1 s
    monkeypatch.setenv("SPECREG_HUB_DEADLINE", "nan")
    assert hubmod.deadline() == 60.0


@pytest.mark.parametrize("fault, words", [
    (("drip", 3.0), "no complete answer within 1 s"),  # a config dripped one byte every 3 s
    (("slow", 600.0), "no complete answer within 1 s"),  # a server that never answers
    (("flood", 64 * 1024 * 1024), "over the 4194304-byte limit"),  # HEAD says 1 KB, the GET streams 64 MB
])
def test_a_dripping_hanging_or_flooding_config_is_given_up_within_the_deadline(hub, tmp_path, fault, words):
    import time

    from conftest import run_specreg

    hub.add(REPO, {"config.json": CONFIG})
    hub.fault("config.json", fault, method="GET")
    start = time.monotonic()
    r = run_specreg("show", REPO, env={"HF_ENDPOINT": hub.url, "HF_HUB_CACHE": str(tmp_path / "hf-cache"),
                                       "SPECREG_HUB_DEADLINE": "1", "SPECREG_HUB_RETRIES": "0",
                                       "HF_HUB_DOWNLOAD_TIMEOUT": "30"}, timeout=60)
    elapsed = time.monotonic() - start
    assert r.returncode == 2 and words in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert elapsed < 15, elapsed
    assert snapshot_files(tmp_path) == []  # nothing half-written reached the cache
