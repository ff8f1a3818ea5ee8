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
