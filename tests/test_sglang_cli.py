"""`--engine sglang` on the command line: serve prints the launch_server command, materialize writes the
directory, check reports the findings without writing, show says what SGLang would serve."""

from __future__ import annotations

import json
import shlex

from conftest import DATA, run_in_process
from tiny import write_pair


def test_serve_prints_the_launch_command_of_the_written_directory(tmp_path):
    draft, _verifier = write_pair(tmp_path, "dspark")
    out = tmp_path / "out"
    done = run_in_process("serve", str(draft), "--engine", "sglang", "--dir", str(out), "--", "--port", "30000")
    assert done.returncode == 0, done.stderr
    argv = shlex.split(done.stdout)
    assert argv[:6] == [
        "python",
        "-m",
        "sglang.launch_server",
        "--model-path",
        "Qwen/Qwen3-8B",
        "--speculative-draft-model-path",
    ]
    assert argv[6] == str(out) and argv[-2:] == ["--port", "30000"]
    assert argv[argv.index("--speculative-dspark-block-size") + 1] == "8"
    assert json.loads((out / "config.json").read_text())["architectures"] == ["Qwen3DSparkModel"]


def test_serve_json_gives_argv_and_env(tmp_path):
    draft, _verifier = write_pair(tmp_path, "dspark")
    done = run_in_process("serve", str(draft), "--engine", "sglang", "--dir", str(tmp_path / "o"), "--json")
    doc = json.loads(done.stdout)
    assert doc["env"] == {} and doc["argv"][2] == "sglang.launch_server"


def test_a_flag_specreg_writes_is_refused_in_one_line_exit_2(tmp_path):
    draft, _verifier = write_pair(tmp_path, "dspark")
    done = run_in_process("serve", str(draft), "--engine", "sglang", "--", "--speculative-num-draft-tokens", "4")
    assert done.returncode == 2
    assert (
        done.stderr.strip()
        .splitlines()[-1]
        .endswith(
            "--speculative-num-draft-tokens after --: specreg writes the model, the draft and its speculative settings "
            "itself; pass SGLang's other flags there"
        )
    )
    assert "Traceback" not in done.stderr


def test_materialize_writes_the_directory_and_prints_the_command(tmp_path):
    draft, _verifier = write_pair(tmp_path, "dspark")
    done = run_in_process("materialize", str(draft), str(tmp_path / "out"), "--engine", "sglang")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"wrote {tmp_path / 'out'}: config.json, specreg.json, 1 weight files linked")
    assert (tmp_path / "out/model.safetensors").is_symlink()


def test_a_draft_sglang_cannot_serve_is_refused_with_the_reason_and_nothing_written(tmp_path):
    draft, _verifier = write_pair(tmp_path, "dflash")  # its checkpoint holds lm_head.weight
    done = run_in_process("materialize", str(draft), str(tmp_path / "out"), "--engine", "sglang")
    assert done.returncode == 1
    assert "# error: sglang-unservable: the checkpoint holds lm_head.weight" in done.stderr
    assert not (tmp_path / "out").exists()


def test_check_reports_the_findings_without_writing(tmp_path):
    done = run_in_process("check", str(DATA / "speculators/peagle.json"), "--engine", "sglang")
    assert done.returncode == 1
    assert "sglang-unservable" in done.stdout and "no parallel drafting" in done.stdout
    ok = run_in_process("check", str(DATA / "speculators/dspark_generated.json"), "--engine", "sglang")
    assert ok.returncode == 0 and "sglang-served-differently" in ok.stdout


def test_show_says_what_sglang_would_serve_from_the_unmodified_file():
    done = run_in_process("show", str(DATA / "native/zlab_dflash_nested_schema.json"), "--engine", "sglang")
    assert done.returncode == 0, done.stderr
    assert "warning sglang-served-differently" in done.stdout
    assert "sliding_attention layers have no sliding_window" in done.stdout
    assert "--speculative-dflash-block-size 16" in done.stdout


def test_vllm_options_are_refused_with_the_sglang_engine(tmp_path):
    done = run_in_process(
        "serve", str(DATA / "speculators/dspark_generated.json"), "--engine", "sglang", "--gpu", "H100"
    )
    assert done.returncode == 2 and "--gpu is about vLLM" in done.stderr


def test_serve_adds_the_catalogs_serving_hints_as_sglang_flags(hub, tmp_path):
    """`serve --engine sglang` dropped the catalog's tensor-parallel hint, which `serve` gives vLLM."""
    from test_serve import hinted_entry

    env = hinted_entry(hub, tmp_path, "tensor_parallel_size = 4\nmax_model_len = 8192\n")
    args = ("serve", "org/draft", "--engine", "sglang", "--dir", str(tmp_path / "d"), "--config-only")
    out = run_in_process(*args, env=env)
    assert out.returncode == 0, out.stderr
    assert shlex.split(out.stdout)[-4:] == ["--tp-size", "4", "--context-length", "8192"]
    mine = run_in_process(*args, "--", "--tensor-parallel-size", "2", env=env)
    assert mine.returncode == 0, mine.stderr
    assert shlex.split(mine.stdout)[-4:] == ["--tensor-parallel-size", "2", "--context-length", "8192"]
    assert "# note: the catalog entry serves this draft with --tp-size 4; you asked for 2\n" in mine.stderr


def test_the_docs_serve_pattern_keeps_a_path_with_a_space_one_argument(tmp_path):
    """docs/sglang.md's `$(specreg serve ... --engine sglang ...) &` split the draft's directory at its
    space: the page's lines are run through bash, with SGLang's `python` a function recording its words."""
    import os
    import subprocess
    import sys

    text = (DATA.parents[1] / "docs" / "sglang.md").read_text()
    block = text.split("reads the acceptance length from SGLang's log:\n\n", 1)[1].split("\n\n", 1)[0]
    draft, _verifier = write_pair(tmp_path / "my drafts", "dspark")
    cache = tmp_path / "a cache"
    script = block.replace("RedHatAI/Qwen3-8B-speculator.dspark", shlex.quote(str(draft))).replace(
        "/tmp/dspark", shlex.quote(str(tmp_path / "sg dir"))
    )
    words = tmp_path / "words"
    prelude = (
        f'specreg() {{ {shlex.quote(sys.executable)} -m specreg "$@"; }}\n'
        f'python() {{ if [ "$2" = sglang.launch_server ]; then printf "%s\\n" "$@" > {shlex.quote(str(words))}; fi; }}\n'
    )
    done = subprocess.run(
        ["bash", "-e", "-c", prelude + script + "\nwait\n"],
        capture_output=True,
        text=True,
        env={**os.environ, "SPECREG_CACHE": str(cache), "HF_HUB_OFFLINE": "1"},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    argv = words.read_text().splitlines()
    served = argv[argv.index("--speculative-draft-model-path") + 1]
    assert " " in served and os.path.isfile(os.path.join(served, "config.json"))
    assert argv[-4:] == ["--port", "30000", "--mem-fraction-static", "0.8"]


def test_serve_for_sglang_refuses_a_verifier_it_cannot_read_unless_the_check_is_skipped(tmp_path):
    draft, _verifier = write_pair(tmp_path, "dspark")
    args = ("serve", str(draft), "--engine", "sglang", "--verifier", "org/other", "--dir", str(tmp_path / "o"))
    r = run_in_process(*args, env={"HF_HUB_OFFLINE": "1"})
    assert r.returncode == 2 and r.stdout == "" and not (tmp_path / "o").exists()
    assert "the draft was not checked against org/other" in r.stderr and "--skip-verifier-check" in r.stderr
    r = run_in_process(*args, "--skip-verifier-check", env={"HF_HUB_OFFLINE": "1"})
    assert r.returncode == 0 and shlex.split(r.stdout)[4] == "org/other", r.stderr
    assert "# warning: verifier-unread: the draft was not checked against org/other" in r.stderr
    assert "(served unchecked: --skip-verifier-check)" in r.stderr
