"""The flags every command reads: serve's vLLM flags after `--` as argparse reads them (abbreviations
included), the integer flags' ranges, and hostile values echoed once, shortened."""

import argparse

import pytest

from conftest import fixture_config, run_specreg
from specreg.vllm import flags as vllm_flags
from specreg.cli.main import main
from weights import write_draft

HUGE = "9" * 100_000
OWNED_TAIL = "specreg writes the model and the speculative config itself; pass vLLM's other flags there"


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    """A source named org/x is never fetched: a refusal at parsing comes before any Hub request."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture
def draft(tmp_path):
    return write_draft(tmp_path / "draft", fixture_config("dflash"))


def refusal(capsys, *argv: str) -> str:
    """The one stderr line of a command that exits 2 (at parsing, or from its handler)."""
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse's usage errors
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and err.endswith("\n"), err
    return err.rstrip("\n")


# -- serve: an abbreviation is the flag argparse resolves it to ----------------------------------------


@pytest.mark.parametrize(
    "flags, full",
    [
        (["--speculative-conf", '{"method": "eagle3"}'], "--speculative-config"),
        (['--speculative-c={"method": "eagle3"}'], "--speculative-config"),
        (["--speculative_conf", "{}"], "--speculative-config"),
        (["--spec-mode", "x"], "--spec-model"),
        (["--spec-to=3"], "--spec-tokens"),
        (["--mod", "x"], "--model"),
        (["-s", "{}"], "-sc"),
        (["--speculative-conf.num_speculative_tokens", "3"], "--speculative-config"),
    ],
)
def test_an_abbreviation_of_a_flag_serve_writes_is_refused_like_the_flag(draft, capsys, flags, full):
    line = refusal(capsys, "serve", str(draft), "--", "--port", "8001", *flags)
    user = flags[0].partition("=")[0]
    assert line == f"error: {user} after --: vLLM reads it as {full}; {OWNED_TAIL}"


def test_an_ambiguous_abbreviation_is_refused_as_argparse_refuses_it(draft, capsys):
    line = refusal(capsys, "serve", str(draft), "--", "--spec-m", "x")
    assert line == (
        "error: the vLLM flags after --: ambiguous option: --spec-m could match --spec-method, --spec-model"
    )


def test_a_flag_vllm_alone_knows_is_passed_through(tmp_path, draft, capsys):
    """A table flag is a prefix of `--data-parallel-size-local`, not the other way round: argparse leaves it to
    vLLM, as it leaves `--port`."""
    assert (
        main(
            [
                "serve",
                str(draft),
                "--dir",
                str(tmp_path / "d"),
                "--config-only",
                "--",
                "--data-parallel-size-local",
                "1",
                "--port=8001",
            ]
        )
        == 0
    ), capsys.readouterr().err
    assert capsys.readouterr().out.rstrip().endswith("--data-parallel-size-local 1 --port=8001")


def _vllm_like_parser():
    """A stand-in for vLLM's parser (FlexibleArgumentParser is an argparse.ArgumentParser with allow_abbrev
    left on: vllm/utils/argparse_utils.py): the table's flags, and two flags only vLLM has."""
    parser = argparse.ArgumentParser(add_help=False)
    for dest in dict.fromkeys(vllm_flags.OPTIONS.values()):
        parser.add_argument(*(o for o, d in vllm_flags.OPTIONS.items() if d == dest), dest=dest)
    parser.add_argument("--data-parallel-size-local", type=int)
    parser.add_argument("--port", type=int, default=8000)
    return parser


@pytest.mark.parametrize(
    "flags, user, full",
    [
        (["--speculative-conf", "{}"], "--speculative-conf", "--speculative-config"),
        (["--spec-mode=x"], "--spec-mode", "--spec-model"),
    ],
)
def test_with_vllms_parser_an_abbreviation_is_named_as_the_user_wrote_it(draft, capsys, monkeypatch, flags, user, full):
    monkeypatch.setattr(vllm_flags, "_live_parser", _vllm_like_parser)
    line = refusal(capsys, "serve", str(draft), "--", *flags)
    assert line == f"error: {user} after --: vLLM reads it as {full}; {OWNED_TAIL}"


def test_with_vllms_parser_its_own_refusal_is_one_line(draft, capsys, monkeypatch):
    """`--data-parallel` is unique in the table but ambiguous to vLLM: vLLM's own words, on one line."""
    monkeypatch.setattr(vllm_flags, "_live_parser", _vllm_like_parser)
    line = refusal(capsys, "serve", str(draft), "--", "--data-parallel", "2")
    assert line == (
        "error: the vLLM flags after --: ambiguous option: --data-parallel could match "
        "--data-parallel-size, --data-parallel-size-local"
    )


def test_with_vllms_parser_an_abbreviated_hint_is_the_users(monkeypatch):
    monkeypatch.setattr(vllm_flags, "_live_parser", _vllm_like_parser)
    assert vllm_flags.settings(["--tensor-parallel", "2", "--max-model=9"]) == (
        {"tensor_parallel_size": "2", "max_model_len": "9"},
        "vLLM's parser",
    )


def test_without_vllm_an_abbreviated_hint_is_the_users():
    assert vllm_flags.settings(["--tensor-parallel", "2", "--max-model=9", "--port", "1", "-qfp8"]) == (
        {"tensor_parallel_size": "2", "max_model_len": "9", "quantization": "fp8"},
        "table",
    )


@pytest.mark.parametrize("value", ["--trust-remote-code", "-x"])
def test_a_verifier_starting_with_a_dash_is_refused(draft, capsys, value):
    line = refusal(capsys, "serve", str(draft), f"--verifier={value}")
    assert line == (
        f"error: specreg serve: argument --verifier: {value!r} starts with '-': no Hub id does, and "
        "vLLM would read it as a flag; write a local directory as ./NAME (see specreg serve --help)"
    )


# -- integer flags: positive, with an upper bound, at parsing -------------------------------------------


@pytest.mark.parametrize(
    "flag, value",
    [
        ("--max-model-len", "-1"),
        ("--max-model-len", "0"),
        ("--max-model-len", str(10**23)),
        ("--tensor-parallel-size", "0"),
        ("--draft-tensor-parallel-size", "0"),
        ("--tensor-parallel-size", "-3"),
    ],
)
def test_check_refuses_an_integer_flag_out_of_range(capsys, flag, value):
    line = refusal(capsys, "check", "org/x", flag, value)
    assert line == (
        f"error: specreg check: argument {flag}: must be an integer from 1 to 1000000000, got {value} "
        "(see specreg check --help)"
    )


@pytest.mark.parametrize("flag", ["--max-model-len", "--tensor-parallel-size", "--draft-tensor-parallel-size"])
def test_a_huge_integer_flag_is_echoed_once_and_shortened(capsys, flag):
    line = refusal(capsys, "check", "org/x", flag, HUGE)
    assert line.count("9" * 30) == 1 and len(line) < 300, line[:400]
    assert "(100,000 characters)" in line


@pytest.mark.parametrize("command", ["check", "serve"])
def test_an_unknown_gpu_is_echoed_once_and_shortened(capsys, command):
    line = refusal(capsys, command, "org/x", "--gpu", "X" * 100_000)
    assert line.count("X" * 30) == 1 and len(line) < 400, line[:500]
    assert f"error: specreg {command}: argument --gpu: unknown GPU 'XXX" in line and "(100,000 characters)" in line


@pytest.mark.parametrize("command", ["check", "serve"])
def test_an_unknown_gpu_is_refused_before_the_source_is_read(capsys, command):
    line = refusal(capsys, command, "org/does-not-exist", "--gpu", "H1000")
    assert line.startswith(f"error: specreg {command}: argument --gpu: unknown GPU 'H1000': give one of V100, "), line


@pytest.mark.parametrize("value", ["0", "-2", "1" + "0" * 30])
def test_verify_refuses_a_tensor_parallel_size_out_of_range(value):
    r = run_specreg("verify", "org/x", "--tensor-parallel-size", value)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.count("\n") == 1 and "--tensor-parallel-size" in r.stderr, r.stderr


run = run_specreg


@pytest.mark.parametrize(
    "option",
    [
        ["--num-prompts", "-1"],
        ["--few-shot", "-2"],
        ["--chunks", "0"],
        ["--k", "-3"],
        ["--max-tokens", "0"],
        ["--temperature", "nan"],
        ["--temperature", "inf"],
        ["--timeout", "-5"],
        ["--concurrency", "0"],
    ],
)
def test_verify_range_checks_its_numeric_options(option):
    out = run("verify", "org/x", "--server", "http://127.0.0.1:9", *option)
    assert out.returncode == 2
    assert f"argument {option[0]}: must be" in out.stderr.strip().splitlines()[-1]
