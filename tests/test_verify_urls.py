"""specreg.verify.urls: what a recorded URL may say."""

import json


def test_a_password_in_the_server_url_is_never_recorded(tmp_path):
    from specreg.verify.run import Options, redact, verify

    assert redact("http://user:s3cret@127.0.0.1:9/x") == "http://user:***@127.0.0.1:9/x"
    assert redact("http://127.0.0.1:9") == "http://127.0.0.1:9"
    out = tmp_path / "out"
    result = verify(
        "org/x",
        Options(server="http://user:s3cret@127.0.0.1:9", dataset_file=str(_prompts_file(tmp_path))),
        out=out,
        history=None,
        progress=lambda _m: None,
    )
    text = "".join(p.read_text(errors="replace") for p in out.rglob("*") if p.is_file())
    assert "s3cret" not in text and "s3cret" not in json.dumps(result)


def _prompts_file(tmp_path):
    path = tmp_path / "prompts.jsonl"
    path.write_text("\n".join(json.dumps({"question": f"q{i}", "answer": "a"}) for i in range(4)))
    return path


def test_redact_hides_a_token_standing_as_the_user_and_a_credential_in_the_query():
    from specreg.verify.urls import redact

    assert redact("https://hf_abc@host/x") == "https://***@host/x"
    assert redact("http://u:p@[::1]:8/") == "http://u:***@[::1]:8/"
    assert redact("http://h/x?token=abc&a=1") == "http://h/x?token=***&a=1"


SECRET = "s3cretXYZ"
#: every variable specreg reads (test_every_variable_specreg_reads_is_planted keeps this whole), with
#: what is planted in it: a credential wherever the value is free text or a URL; a path or a number
#: where the variable is one (a path is printed as given: `env` says where the caches are)
PLANTED = {
    "HF_ENDPOINT": None,  # the loopback Hub, reached with user:password in its URL
    "HF_TOKEN": f"hf_{SECRET}",
    "HF_HUB_OFFLINE": f"http://u:{SECRET}@h",  # not a truthy word: online
    "TRANSFORMERS_OFFLINE": f"http://u:{SECRET}@h",
    "HF_DATASETS_OFFLINE": f"http://u:{SECRET}@h",
    "VLLM_PLUGINS": f"http://u:{SECRET}@h",
    "SPECREG_VLLM_PLUGIN": f"http://u:{SECRET}@h",
    "VLLM_USE_V2_MODEL_RUNNER": f"http://u:{SECRET}@h",
    "SPECREG_DEBUG": f"http://u:{SECRET}@h",  # truthy: tracebacks are printed too
    "SPECREG_HUB_RETRIES": "0",
    "SPECREG_HUB_BACKOFF": "0.01",
    "SPECREG_HUB_DEADLINE": "20",
    "SPECREG_VERIFY_IDLE_WAIT": "0",
    "SPECREG_CACHE": "path",
    "SPECREG_REGISTRY": "path",
    "HF_HUB_CACHE": "path",
    "HF_HOME": "path",
}


def test_every_variable_specreg_reads_is_planted():
    """The variables are found in the code (os.environ.get/[...] and the plugin's SWITCH), so a new one
    fails here until its value is planted below."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "specreg"
    text = "\n".join(p.read_text() for p in root.rglob("*.py"))
    read = set(re.findall(r"""(?:environ(?:\.get)?[(\[]|getenv\()\s*"([A-Z0-9_]+)\"""", text))
    read |= set(re.findall(r'^SWITCH = "([A-Z0-9_]+)"', text, re.M))
    assert read == set(PLANTED)


def test_no_command_prints_a_credential_planted_in_any_variable_specreg_reads(hub, tmp_path):
    """`specreg env` is pasted into bug reports: it printed HF_ENDPOINT with its password."""
    from conftest import DATA, run_in_process

    hub.add("org/draft", {"config.json": (DATA / "speculators" / "eagle3_generated.json").read_bytes()})
    host = hub.url.split("://", 1)[1]
    env = {k: v for k, v in PLANTED.items() if v != "path"}
    env["HF_ENDPOINT"] = f"http://user:{SECRET}@{host}"
    env["SPECREG_REGISTRY"] = str(DATA.parents[1] / "registry")
    env["HF_HOME"] = str(tmp_path / "hf-home")
    commands = [
        ["env"],
        ["env", "--json"],
        ["show", "org/draft"],
        ["show", "org/draft", "--json"],
        ["show", "org/missing"],
        ["check", "org/draft", "--verifier", "org/missing-verifier"],
        ["serve", "org/draft", "--json"],
    ]
    for argv in commands:
        r = run_in_process(*argv, env=env)
        said = r.stdout + r.stderr
        assert said.strip() and SECRET not in said, (argv, said)
    r = run_in_process("env", env=env)
    assert f"Hub endpoint     http://user:***@{host}" in r.stdout


def test_a_token_standing_as_the_user_of_the_server_url_is_never_recorded(tmp_path):
    from specreg.verify.run import Options, verify

    out = tmp_path / "out"
    result = verify(
        "org/x",
        Options(server=f"http://hf_{SECRET}@127.0.0.1:9", dataset_file=str(_prompts_file(tmp_path))),
        out=out,
        history=None,
        progress=lambda _m: None,
    )
    text = "".join(p.read_text(errors="replace") for p in out.rglob("*") if p.is_file())
    assert SECRET not in text and SECRET not in json.dumps(result) and "http://***@127.0.0.1:9" in text
