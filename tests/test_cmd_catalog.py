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


def test_a_snapshot_that_links_out_of_the_catalog_is_a_problem_and_not_read(tmp_path):
    from conftest import run_in_process

    outside = tmp_path / "outside.config.json"
    outside.write_text("{}")
    reg = registry_with(tmp_path, x=lambda p: p.write_text(MINIMAL.format(id="org/x")))
    (reg / "org" / "x.config.json").symlink_to(outside)
    r = run_in_process("catalog", "check", "--registry", str(reg))
    assert r.returncode == 1
    assert (
        f"{reg / 'org' / 'x.config.json'}: $: leads to {outside}, outside the catalog directory {reg}: not read"
        in r.stderr
    )


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


# -- ranking for a verifier ------------------------------------------------------------------------


def _ranked_entry(entry_id: str, verifier: str, *figures: tuple[str, str, str]) -> str:
    """An entry with one baseline per figure: (metric = value, harness lines)."""
    text = MINIMAL.replace("{id}", entry_id).replace("org/v", verifier)
    for metric, harness in figures:
        name, _, value = metric.partition("=")
        text += (
            '\n[[baselines]]\nkind = "published"\nsource = "https://example.org/card"\n\n[baselines.harness]\n'
            f"{harness}\n\n[baselines.metrics.{name}]\nvalue = {value}\n\n"
            f'[baselines.provenance]\nfigure = "printed"\nrow = "| MT-Bench | {value} |"\n'
        )
    return text


def test_catalog_list_for_a_verifier_ranks_only_figures_of_the_same_metric_k_dataset_and_engine(tmp_path):
    files = {
        "org/k3.toml": _ranked_entry(
            "org/k3",
            "Qwen/Qwen3-8B",
            ("acceptance_length=2.26", 'dataset = "mt-bench"\nk = 3\nvllm_version = "0.33.0"'),
            ("draft_acceptance_rate=0.42", 'dataset = "mt-bench"\nk = 3\nvllm_version = "0.33.0"'),
        ),
        "org/k7.toml": _ranked_entry(
            "org/k7", "Qwen/Qwen3-8B", ("acceptance_length=3.9", 'dataset = "mt-bench"\nk = 7\nengine = "sglang"')
        ),
        "org/k3b.toml": _ranked_entry(
            "org/k3b",
            "qwen/qwen3-8b",
            ("acceptance_length=2.4", 'dataset = "mt-bench"\nk = 3\nengine = "vLLM"'),
            ("acceptance_length=2.9", 'dataset = "gsm8k"\nk = 3\nengine = "vllm"'),
            ("acceptance_length=6.0", 'dataset = "gsm8k"'),
        ),
        "org/k15.toml": _ranked_entry(
            "org/k15", "Qwen/Qwen3-8B", ("acceptance_length=4.5", 'dataset = "mt-bench"\nk = 15')
        ),
        "org/none.toml": _ranked_entry("org/none", "Qwen/Qwen3-8B"),
        "org/other.toml": _ranked_entry(
            "org/other", "Qwen/Qwen3-32B", ("acceptance_length=9.9", 'dataset = "mt-bench"\nk = 3')
        ),
    }
    reg = tmp_path / "registry"
    for name, text in files.items():
        (reg / name).parent.mkdir(parents=True, exist_ok=True)
        (reg / name).write_text(text)
    out = run("catalog", "list", "--verifier", "QWEN/qwen3-8B", "--registry", str(reg))
    assert out.returncode == 0, out.stderr
    assert out.stdout == (
        "metric  k   dataset   engine  #  value  algorithm  id        baseline\n"
        "AL      3   gsm8k     vllm    1  2.9    eagle3     org/k3b   1\n"
        "AL      3   mt-bench  vLLM    1  2.4    eagle3     org/k3b   0\n"
        "AL      3   mt-bench  vllm    2  2.26   eagle3     org/k3    0\n"
        "AL      7   mt-bench  sglang  1  3.9    eagle3     org/k7    0\n"
        "AL      15  mt-bench  ?       1  4.5    eagle3     org/k15   0\n"
        "AL      ?   gsm8k     ?       -  6      eagle3     org/k3b   2\n"
        "accept  3   mt-bench  vllm    1  0.42   eagle3     org/k3    1\n"
        "-       -   -         -       -  -      eagle3     org/none  -\n"
    )
    at_3 = run("catalog", "list", "--verifier", "Qwen/Qwen3-8B", "--k", "3", "--registry", str(reg))
    assert at_3.returncode == 0, at_3.stderr
    assert [line.split()[1] for line in at_3.stdout.splitlines()[1:]] == ["3", "3", "3", "3"]
    assert {line.split()[-2] for line in at_3.stdout.splitlines()[1:]} == {"org/k3", "org/k3b"}
    plain = run("catalog", "list", "--k", "7", "--registry", str(reg))
    assert plain.stdout.splitlines() == [
        "id      algorithm  verifier       k  status    baselines  AL",
        "org/k7  eagle3     Qwen/Qwen3-8B  7  unpinned  1          3.9",
    ]
    every = run("catalog", "list", "org/k3b", "--registry", str(reg)).stdout.splitlines()[1]
    assert every.split()[3] == "3"  # its third baseline states no k: "3", not "3,?"
    assert out.stderr == (
        "5 of 6 entries; figures ranked only within the same metric, k, dataset and engine (#1 starts a group); "
        "? is what the source does not say, and a figure without its k or dataset is not ranked (#-)\n"
    )


def test_pin_of_a_mistyped_id_names_the_id_it_meant(tmp_path):
    import shutil

    from conftest import DATA

    reg = tmp_path / "reg"
    shutil.copytree(DATA.parent.parent / "registry" / "RedHatAI", reg / "RedHatAI")
    r = run("catalog", "pin", "RedHatAI/Qwen3-8B-speculator.dflsh", "--registry", str(reg), env={"HF_HUB_OFFLINE": "1"})
    assert r.returncode == 2
    assert r.stderr.rstrip().endswith("(did you mean RedHatAI/Qwen3-8B-speculator.dflash?)")


# -- k: stated by every baseline, served at a k its baselines were measured at ---------------------


def _checked(tmp_path, text: str):
    reg = tmp_path / "registry"
    (reg / "org").mkdir(parents=True)
    (reg / "org" / "x.toml").write_text(text)
    r = run("catalog", "check", "--registry", str(reg))
    assert r.returncode == 0, r.stderr
    return [line.split(": ", 3)[2:] for line in r.stderr.splitlines() if line.startswith("warning: ")]


def test_a_baseline_without_k_or_a_k_note_is_a_warning(tmp_path):
    entry = _ranked_entry("org/x", "org/v", ("acceptance_length=2.5", 'dataset = "mt-bench"'))
    assert _checked(tmp_path, entry) == [
        [
            "$.baselines[0].harness.k",
            "no k: give the k the figure was measured at, or harness.k_note saying the source does not",
        ]
    ]
    noted = entry.replace('dataset = "mt-bench"', 'dataset = "mt-bench"\nk_note = "not given beside the table"')
    assert _checked(tmp_path / "noted", noted) == []


def test_a_published_figure_says_whether_it_is_printed_or_computed_and_keeps_the_source_row(tmp_path):
    kept = _ranked_entry("org/x", "org/v", ("acceptance_length=2.5", 'dataset = "mt-bench"\nk = 3'))
    assert _checked(tmp_path / "kept", kept) == []
    table = '[baselines.provenance]\nfigure = "printed"\nrow = "| MT-Bench | 2.5 |"\n'
    assert table in kept
    bare = kept.replace(table, "")
    assert _checked(tmp_path / "bare", bare) == [
        [
            "$.baselines[0].provenance",
            "no provenance: say whether the source prints the figure or it was computed (figure), with the source's "
            "row as printed (row) or why it is not kept (note)",
        ]
    ]
    rowless = kept.replace('row = "| MT-Bench | 2.5 |"\n', "")
    assert _checked(tmp_path / "rowless", rowless) == [
        ["$.baselines[0].provenance.row", "no row: keep the source's row as printed, or say why not in note"]
    ]
    why = rowless + 'note = "the card is not in the stored copies"\n'
    assert _checked(tmp_path / "why", why) == []
    computed = kept.replace('figure = "printed"', 'figure = "computed"')
    assert _checked(tmp_path / "computed", computed) == [
        ["$.baselines[0].provenance.note", "a computed figure says in note how it was computed"]
    ]
    said = computed + 'note = "the mean of the 9 per-task rows"\n'
    assert _checked(tmp_path / "said", said) == []
    shown = run("catalog", "show", "org/x", "--registry", str(tmp_path / "said" / "registry"))
    assert shown.returncode == 0, shown.stderr
    assert "  figure    computed from the source; its row: | MT-Bench | 2.5 |\n" in shown.stdout
    assert "            the mean of the 9 per-task rows\n" in shown.stdout
    measured = bare.replace('kind = "published"', 'kind = "measured"')  # this tool's own run
    assert _checked(tmp_path / "measured", measured) == []
    typo = kept.replace('figure = "printed"', 'figure = "printd"')
    reg = tmp_path / "typo" / "registry"
    (reg / "org").mkdir(parents=True)
    (reg / "org" / "x.toml").write_text(typo)
    r = run("catalog", "check", "--registry", str(reg))
    assert r.returncode == 1 and '$.baselines[0].provenance.figure: must be one of "printed", "computed"' in r.stderr


def test_every_published_figure_in_the_catalog_keeps_its_source_row_or_says_why_not():
    from specreg.entries import catalog

    published = [b for e in catalog().values() for b in e.baselines if b.kind == "published"]
    assert published and all(b.provenance is not None for b in published)
    assert all(b.provenance.row or b.provenance.note for b in published)


def test_a_serving_k_none_of_the_primary_baselines_was_measured_at_needs_a_note(tmp_path):
    entry = _ranked_entry("org/x", "org/v", ("acceptance_length=3.5", 'dataset = "mt-bench"\nk = 7'))
    served = entry.replace('[verifier]\nid = "org/v"\n', '[verifier]\nid = "org/v"\n\n[serving]\nk = 6\n')
    assert served != entry
    assert _checked(tmp_path, served) == [
        [
            "$.serving.k",
            "served at k = 6, its primary baselines measured at k = 7: say why in serving.k_note (a figure at "
            "another k is not the one a served draft reaches)",
        ]
    ]
    why = served.replace("k = 6\n", 'k = 6\nk_note = "the card serves 6 and measures at 7"\n', 1)
    assert _checked(tmp_path / "why", why) == []
    swept = served.replace("k = 7", "k = 6", 1)  # a baseline at the served k
    assert _checked(tmp_path / "swept", swept) == []
