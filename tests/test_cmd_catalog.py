"""`specreg catalog` on the CLI: what its filters refuse, and hostile entry files and values (links out of
the catalog, terminal controls, case-only id twins, oversized configs to pin)."""

import json
import os

import pytest

from conftest import run_specreg
from hostile_helpers import BIG_CONFIG, MINIMAL

run = run_specreg


@pytest.mark.parametrize(
    ("flag", "value", "hint"),
    [
        ("--algorithm", "dflsh", "did you mean 'dflash'?"),
        ("--tag", "vllm_ci", "did you mean 'vllm-ci'?"),
        ("--verifier", "Qwen/Qwen3-9B", "known: "),
    ],
)
def test_catalog_list_filters_refuse_values_no_entry_has(flag, value, hint):
    out = run("catalog", "list", flag, value)
    assert out.returncode == 2 and out.stderr.startswith(f"error: {flag} {value!r}: no catalog entry has it")
    assert hint in out.stderr


# -- names that end in a newline, terminal escapes --------------------------------------------------


@pytest.mark.parametrize("field", ["revision", "config_sha256"])
def test_the_catalog_refuses_a_hash_ending_in_a_newline(tmp_path, field):
    value = "a" * (40 if field == "revision" else 64) + "\n"
    reg = tmp_path / "registry"
    (reg / "org").mkdir(parents=True)
    (reg / "org" / "x.toml").write_text(
        f'id = "org/x"\nalgorithm = "eagle3"\nstatus = "pinned"\n{field} = {json.dumps(value)}\n'
        '\n[verifier]\nid = "org/v"\n'
    )
    r = run("catalog", "check", "--registry", str(reg))
    assert r.returncode == 1 and f"$.{field}" in r.stderr


def test_catalog_show_escapes_terminal_controls_from_the_entry(tmp_path):
    reg = tmp_path / "registry"
    (reg / "org").mkdir(parents=True)
    (reg / "org" / "x.toml").write_text(
        'id = "org/x"\nalgorithm = "eagle3"\nstatus = "unpinned"\n'
        'notes = "fine\\u001b[2J\\u001b[Hcleared"\n\n[verifier]\nid = "org/v"\n'
    )
    for args in (("catalog", "show", "org/x"), ("catalog", "list")):
        r = run(*args, "--registry", str(reg))
        assert r.returncode == 0, r.stderr
        assert "\x1b" not in r.stdout + r.stderr


# -- catalog files ------------------------------------------------------------------------------------


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
    make = {
        "fifo": lambda p: os.mkfifo(p),
        "directory": lambda p: p.mkdir(),
        "dangling link": lambda p: p.symlink_to(tmp_path / "registry" / "org" / "gone.toml"),
    }[kind]
    reg = registry_with(tmp_path, x=make)
    r = run("catalog", "check", "--registry", str(reg))
    assert r.returncode == 1 and "x.toml" in r.stderr and "cannot read" in r.stderr, r.stderr


# -- every config fetch is capped ------------------------------------------------------------------------


def test_catalog_pin_is_capped(hub, tmp_path):
    hub.add("org/huge", {"config.json": BIG_CONFIG})
    reg = tmp_path / "registry"
    (reg / "org").mkdir(parents=True)
    (reg / "org" / "huge.toml").write_text(MINIMAL.format(id="org/huge"))
    r = run("catalog", "pin", "org/huge", "--registry", str(reg))
    assert r.returncode == 2 and "over the 4194304-byte limit" in r.stderr, r.stderr
    assert hub.bytes_sent("config.json") == 0


# -- catalog values verify would refuse --------------------------------------------------------------------

HARNESS_ENTRY = (
    'id = "org/x"\nalgorithm = "eagle3"\nstatus = "unpinned"\n\n[verifier]\nid = "org/v"\n\n'
    '[[baselines]]\nkind = "published"\nsource = "s"\n\n[baselines.harness]\ndataset = "gsm8k"\n{harness}\n'
    "[baselines.metrics.acceptance_length]\nvalue = 2.0\n"
)


@pytest.mark.parametrize(
    "line, path",
    [
        ("temperature = 200.0", "harness.temperature"),
        ("seed = -1", "harness.seed"),
        ("max_tokens = 2000000000", "harness.max_tokens"),
        ('\n[baselines.harness.prompt]\ntemplate = "{question:>1500000000}"', "harness.prompt.template"),
        ('\n[baselines.harness.prompt]\ntemplate = "{question.__class__}"', "harness.prompt.template"),
    ],
)
def test_catalog_check_refuses_a_harness_value_verify_would_refuse(tmp_path, line, path):
    reg = tmp_path / "registry"
    (reg / "org").mkdir(parents=True)
    (reg / "org" / "x.toml").write_text(HARNESS_ENTRY.format(harness=line))
    r = run("catalog", "check", "--registry", str(reg))
    assert r.returncode == 1 and f"$.baselines[0].{path}" in r.stderr, r.stderr


def test_catalog_show_names_the_deciding_harness_settings_a_source_leaves_out(tmp_path):
    """A figure whose source gives no temperature or GPU says so, instead of reading as complete."""
    partial = MINIMAL.format(id="org/partial") + (
        '\n[[baselines]]\nkind = "published"\nsource = "https://example.org/card"\n\n'
        '[baselines.harness]\ndataset = "mt-bench"\nk = 3\n\n'
        "[baselines.metrics.acceptance_length]\nvalue = 2.5\n"
    )
    every = partial.replace("org/partial", "org/every").replace(
        "k = 3\n",
        'k = 3\nnum_prompts = 80\ntemperature = 0.0\nmax_tokens = 256\nvllm_version = "0.33.0"\ngpu = "1xH100"\n',
    )
    reg = registry_with(
        tmp_path,
        partial=lambda p: p.write_text(partial),
        every=lambda p: p.write_text(every),
    )
    r = run("catalog", "show", "org/partial", "--registry", str(reg))
    assert r.returncode == 0, r.stderr
    assert "  unknown   num_prompts, temperature, max_tokens, vllm_version, gpu (the source does not say)" in r.stdout
    r = run("catalog", "show", "org/every", "--registry", str(reg))
    assert r.returncode == 0 and "unknown" not in r.stdout, r.stdout + r.stderr


def test_pin_of_a_mistyped_id_names_the_id_it_meant(tmp_path):
    import shutil

    from conftest import DATA

    reg = tmp_path / "reg"
    shutil.copytree(DATA.parent.parent / "registry" / "RedHatAI", reg / "RedHatAI")
    r = run("catalog", "pin", "RedHatAI/Qwen3-8B-speculator.dflsh", "--registry", str(reg), env={"HF_HUB_OFFLINE": "1"})
    assert r.returncode == 2
    assert r.stderr.rstrip().endswith("(did you mean RedHatAI/Qwen3-8B-speculator.dflash?)")
