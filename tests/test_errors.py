"""Which Hub error a user meets (specreg/errors.py), against the loopback Hub: `OfflineError` for every
case where no answer came from the Hub (offline mode, a refused connection, a server that hangs up
or cuts the body, no complete answer in time), `HubError` itself when the Hub answered and failed."""

import pytest

import specreg
from conftest import DATA
from test_sources_hub import no_resume_pause  # noqa: F401 - a fixture: huggingface_hub's resume pauses skipped

REPO = "org/draft"
CONFIG = (DATA / "speculators" / "dflash.json").read_bytes()
#: org/draft may be a local directory too: the Hub's answer follows that (tests/test_api.py)
NOT_HERE = f"{REPO}: no local directory {REPO}; as a Hub repository: "


def test_offline_mode_with_nothing_cached_is_an_offline_error(hub, monkeypatch):
    hub.add(REPO, {"config.json": CONFIG})
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(specreg.OfflineError) as info:
        specreg.load(REPO)
    assert (
        str(info.value)
        == NOT_HERE + "config.json is not in the Hugging Face cache and offline mode is on (HF_HUB_OFFLINE)"
    )
    assert hub.count() == 0


def test_a_refused_connection_is_an_offline_error(monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # the discard port: nothing listens on loopback
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with pytest.raises(specreg.OfflineError) as info:
        specreg.load(REPO)
    assert (
        str(info.value)
        == NOT_HERE + "could not fetch config.json: the connection failed (ConnectError) (tried 3 times)"
    )


@pytest.mark.parametrize(
    "env, fault, method, says",
    [
        (
            {},
            "forever:hangup",
            None,
            "could not fetch config.json: the connection failed (RemoteProtocolError) (tried 3 times)",
        ),
        # the abandoned download (it runs on after the deadline) makes no second try, elsewhere
        (
            {"SPECREG_HUB_DEADLINE": "0.5", "SPECREG_HUB_RETRIES": "0"},
            "forever:slow:5",
            "GET",
            f"config.json of {REPO}: no complete answer within 0.5 s (SPECREG_HUB_DEADLINE): gave up",
        ),
    ],
)
def test_a_server_that_hangs_up_or_never_finishes_its_answer_is_an_offline_error(
    hub, monkeypatch, env, fault, method, says
):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    hub.add(REPO, {"config.json": CONFIG})
    hub.fault("config.json", fault, method=method)
    with pytest.raises(specreg.OfflineError) as info:
        specreg.load(REPO)
    assert str(info.value) == NOT_HERE + says


def test_a_body_cut_every_time_is_an_offline_error(hub, monkeypatch, no_resume_pause):  # noqa: F811
    monkeypatch.setenv("SPECREG_HUB_RETRIES", "0")
    hub.add(REPO, {"config.json": CONFIG})
    hub.fault("config.json", "forever:cut:100", method="GET")
    with pytest.raises(specreg.OfflineError, match="could not fetch config.json: the connection failed"):
        specreg.load(REPO)


@pytest.mark.parametrize(
    "files, fault, kind, says",
    [
        (
            {"config.json": CONFIG},
            "forever:503",
            specreg.HubError,
            "the Hub answered HTTP 503 for config.json of org/draft (tried 3 times)",
        ),
        (
            {"README.md": b"# no config"},
            None,
            specreg.FileNotFoundOnHubError,
            "the repository org/draft has no config.json",
        ),
    ],
)
def test_an_answer_from_the_hub_is_never_an_offline_error(hub, files, fault, kind, says):
    hub.add(REPO, files)
    if fault:
        hub.fault("config.json", fault)
    with pytest.raises(kind) as info:
        specreg.load(REPO)
    assert not isinstance(info.value, specreg.OfflineError)
    assert str(info.value) == f"{REPO}: {says}"


def test_offline_mode_turned_off_in_a_running_process_reaches_the_hub_again(hub):
    """specreg reads HF_HUB_OFFLINE at each call; huggingface_hub reads it once, when imported (here, while
    it is on), and refuses every request after that unless specreg tells it."""
    import os
    import subprocess
    import sys

    commit = hub.add(REPO, {"config.json": CONFIG})
    code = (
        "import os, specreg\n"
        "os.environ['HF_HUB_OFFLINE'] = '1'\n"
        "try:\n    specreg.load('org/draft')\nexcept specreg.OfflineError:\n    pass\n"
        "del os.environ['HF_HUB_OFFLINE']\n"
        "print(specreg.load('org/draft').origin.commit)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"},
    )
    assert (done.returncode, done.stdout.strip()) == (0, commit), done.stderr[-2000:]
