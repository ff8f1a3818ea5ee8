"""The catalog: schema, seed entries, API, attachment by load(), and the catalog CLI."""

import hashlib
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import specreg
from conftest import fixture_config
from specreg import entries

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "registry"


def run(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "specreg", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


MINIMAL = """\
id = "org/draft"
algorithm = "dflash"
status = "unpinned"

[verifier]
id = "Qwen/Qwen3-8B"
"""


def registry_with(tmp_path, files: dict[str, str]) -> Path:
    root = tmp_path / "registry"
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


# -- the shipped catalog --------------------------------------------------------------------------


def test_the_shipped_catalog_is_valid():
    report = entries.check(SHIPPED)
    assert report.problems == ()
    assert report.entries == 206
    # GLM-5.2's held-out validation figures are filed with the card's own harness, its per-position
    # accuracies (which are not vLLM's counters) in notes: nothing is inconsistent any more (issue 46)
    assert report.warnings == ()


def test_seed_numbers_are_stored_as_published():
    cat = specreg.catalog()
    llama = cat["RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3"].baselines[0]
    assert llama.metrics.acceptance_length.value == 2.60
    assert llama.metrics.acceptance_length.direction == "two-sided"
    assert llama.metrics.acceptance_length.tolerance == 0.05
    assert llama.metrics.per_position.values == (0.7296, 0.5208, 0.3545)
    assert (llama.harness.num_prompts, llama.harness.seed, llama.harness.max_tokens, llama.harness.k) == (
        80,
        42,
        256,
        3,
    )
    dflash = cat["nm-testing/dflash-qwen3-8b-speculators"].baselines[0]
    assert dflash.metrics.accuracy.value == 0.885
    assert (dflash.metrics.acceptance_length.direction, dflash.metrics.acceptance_length.tolerance) == ("higher", 0.15)
    dspark = cat["deepseek-ai/dspark_qwen3_4b_block7"].baselines[0].metrics.acceptance_length
    assert (dspark.value, dspark.low, dspark.high) == (3.994, 3.928, 4.037)


def test_secondary_numbers_stay_marked():
    cat = specreg.catalog()
    secondary = {e.id for e in cat.values() for b in e.baselines if b.secondary}
    assert secondary == {
        "AQ-MedAI/Kimi-K2-Instruct-eagle3",
        "Dogacel/specdrift-gpt-oss-20b-eagle3",
        "AQ-MedAI/Qwen3.5-397B-A17B-eagle3",
        "RedHatAI/GLM-5.2-speculator.dspark",
        "RedHatAI/GLM-5.2-speculator.dspark-preview",
        "RedHatAI/Qwen3-8B-speculator.dflash",
        "RedHatAI/Qwen3-8B-speculator.peagle",
        "RedHatAI/gemma-4-31B-it-speculator.dflash",
        "RedHatAI/gemma-4-31B-it-speculator.eagle3",
        "amazon/Qwen3-Coder-30B-A3B-Instruct-P-EAGLE",
        "amazon/gpt-oss-120b-p-eagle",
        "deepseek-ai/dspark_qwen3_8b_block7",
        "k-l-lambda/kimi-k2.6-eagle3-mla",
        "lightseekorg/kimi-k2.5-eagle3",
        "lightseekorg/kimi-k2.5-eagle3-mla",
        "lightseekorg/kimi-k2.6-eagle3-mla",
        "nvidia/Kimi-K2.6-Eagle3",
        "thoughtworks/GLM-4.7-Flash-Eagle3",
        "z-lab/Qwen3-4B-DFlash-b16",
        "z-lab/Qwen3.6-27B-DFlash",
    }
    assert all(b.kind == "published" for e in cat.values() for b in e.baselines)
    assert all(e.status == "unpinned" and e.revision is None for e in cat.values())


def test_every_baseline_names_where_its_source_is():
    """A web address, or a repository and path (vLLM's CI files): a reader can open every source."""
    import re

    cat = specreg.catalog()
    unaddressed = [
        (e.id, i, b.source)
        for e in cat.values()
        for i, b in enumerate(e.baselines)
        if "https://" not in b.source and not re.match(r"[\w.-]+/[\w.-]+ ", b.source)
    ]
    assert unaddressed == []


def test_glm_5_2_dspark_carries_the_harness_of_the_card_its_figures_come_from():
    entry = specreg.catalog()["RedHatAI/GLM-5.2-speculator.dspark"]
    assert entry.verifier.id == "zai-org/GLM-5.2-FP8" and entry.serving.quantization == "fp8"
    assert "5 draft layers" in entry.notes
    (validation,) = entry.baselines
    assert (validation.harness.gpu, validation.harness.engine, validation.harness.split) == (
        "B300",
        "validation",
        "held-out",
    )
    assert validation.metrics.acceptance_length.value == 3.967
    # the card's per-position accuracies do not sum to its AL: they are not vLLM's counters
    assert validation.metrics.per_position is None and "0.829 / 0.723" in validation.harness.notes


def test_entries_without_numbers_are_listed_with_what_is_known():
    bare = [e for e in specreg.catalog().values() if not e.baselines]
    assert {"RedHatAI/gemma-4-31B-it-speculator.dflash2", "RedHatAI/gemma-4-31B-it-speculator.dspark"} <= {
        e.id for e in bare
    }
    assert all(e.notes for e in bare), [e.id for e in bare if not e.notes]
    # the headline draft has the published community baseline (issue 40)
    headline = specreg.catalog()["RedHatAI/gemma-4-31B-it-speculator.dflash"].baselines[0]
    assert headline.metrics.draft_acceptance_rate.value == 0.2882
    assert (headline.harness.num_prompts, headline.harness.k, headline.harness.max_tokens) == (80, 8, 2048)


# -- the API --------------------------------------------------------------------------------------


def test_lookup_filter_and_natural_sort(tmp_path):
    files = {f"org/m{n}.toml": MINIMAL.replace("org/draft", f"org/m{n}") for n in (10, 2, 1)}
    files["org/e.toml"] = (
        MINIMAL.replace("org/draft", "org/e")
        .replace('"dflash"', '"eagle3"')
        .replace('status = "unpinned"', 'status = "unpinned"\ntags = ["fast"]')
        .replace("Qwen/Qwen3-8B", "meta-llama/L")
    )
    cat = specreg.catalog(registry_with(tmp_path, files))
    assert list(cat) == ["org/e", "org/m1", "org/m2", "org/m10"]  # a Mapping of ids
    assert [e.id for e in cat.values()] == list(cat) and dict(cat.items())["org/e"].algorithm == "eagle3"
    assert [e.id for e in cat.filter(algorithm="eagle3")] == ["org/e"]
    assert [e.id for e in cat.filter(verifier="Qwen/Qwen3-8B")] == ["org/m1", "org/m2", "org/m10"]
    assert [e.id for e in cat.filter(tag="fast")] == ["org/e"]
    assert cat.get("org/nope") is None and "org/m2" in cat and "ORG/M2" in cat  # ids match as the Hub's do
    with pytest.raises(KeyError) as err:
        cat["org/m3"]
    assert str(err.value) == "no catalog entry org/m3 (did you mean org/m1?)" or "did you mean" in str(err.value)
    assert [e.id for e in cat.match("org/m1*")] == ["org/m1", "org/m10"]
    assert [e.id for e in cat.filter(pattern="*/M?", algorithm="dflash")] == ["org/m1", "org/m2"]


def test_every_problem_is_reported_at_once_with_file_and_path(tmp_path):
    bad = (
        MINIMAL.replace('status = "unpinned"', 'status = "unpinned"\ncolour = 3')
        + """
[serving]
k = "three"

[[baselines]]
kind = "guess"
source = "a paper"

[baselines.harness]
temperature = true

[baselines.metrics.acceptance_length]
value = 2.5
"""
    )
    root = registry_with(tmp_path, {"org/draft.toml": bad, "org/other.toml": 'id = "org/other"\n'})
    r = run("catalog", "check", "--registry", str(root))
    assert r.returncode == 1
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    draft, other = str(root / "org" / "draft.toml"), str(root / "org" / "other.toml")
    assert f"error: {draft}: $: unknown key colour" in errors
    assert f'error: {draft}: $.serving.k: expected an integer, got "three"' in errors
    assert f'error: {draft}: $.baselines[0].kind: must be one of "published", "measured"' in errors
    assert f"error: {draft}: $.baselines[0].harness.temperature: expected a number, got true" in errors
    assert f"error: {other}: $.algorithm: required key missing" in errors
    assert r.stdout.strip().endswith("problems, 0 warnings")


@pytest.mark.parametrize(
    "change, path, message",
    [
        (("org/draft", "org/elsewhere"), "$.id", "belongs in org/elsewhere.toml"),
        (('"dflash"', '"dflash9"'), "$.algorithm", "not a registered algorithm"),
        (('status = "unpinned"', 'status = "pinned"'), ["$.revision", "$.config_sha256"], "needs revision"),
        (
            ('status = "unpinned"', 'status = "unpinned"\nrevision = "main"'),
            ["$.revision", "$.status"],
            "not a 40-hex commit",
        ),
        (('status = "unpinned"', 'status = "unpinned"\nconfig_sha256 = "' + "a" * 64 + '"'), "$.status", "is pinned"),
        (('id = "Qwen/Qwen3-8B"', 'id = "/mnt/qwen"'), "$.verifier.id", "not a Hub repo id"),
    ],
)
def test_rules_beyond_types(tmp_path, change, path, message):
    text = MINIMAL.replace(*change)
    _entries, found = entries.read_catalog(registry_with(tmp_path, {"org/draft.toml": text}))
    paths = path if isinstance(path, list) else [path]
    assert [p.path for _, p in found] == paths, found
    assert message in found[0][1].message


def test_a_verified_entry_needs_a_measured_baseline(tmp_path):
    text = MINIMAL.replace(
        'status = "unpinned"', f'status = "verified"\nrevision = "{"a" * 40}"\nconfig_sha256 = "{"b" * 64}"'
    )
    _, found = entries.read_catalog(registry_with(tmp_path, {"org/draft.toml": text}))
    assert [p.message for _, p in found] == ['status "verified" needs a measured baseline']


@pytest.mark.parametrize(
    "metric, problem",
    [
        ("[baselines.metrics.acceptance_length]\nvalue = 0.5\n", "$.baselines[0].metrics.acceptance_length.value"),
        (
            "[baselines.metrics.acceptance_length]\nvalue = 2.0\ntolerance = 1.5\n",
            "$.baselines[0].metrics.acceptance_length.tolerance",
        ),
        ("[baselines.metrics.acceptance_length]\nlow = 3.0\n", "$.baselines[0].metrics.acceptance_length"),
        ("[baselines.metrics.per_position]\nvalues = [0.5, 1.2]\n", "$.baselines[0].metrics.per_position.values[1]"),
        ('[baselines.metrics.accuracy]\nnotes = "no number"\n', "$.baselines[0].metrics.accuracy"),
        ("", "$.baselines[0].metrics"),
    ],
)
def test_metric_ranges(tmp_path, metric, problem):
    text = (
        MINIMAL
        + '\n[[baselines]]\nkind = "published"\nsource = "s"\n\n[baselines.harness]\n\n[baselines.metrics]\n'
        + metric
    )
    _, found = entries.read_catalog(registry_with(tmp_path, {"org/draft.toml": text}))
    assert [p.path for _, p in found] == [problem]


def test_a_config_snapshot_must_normalize_without_errors(tmp_path):
    good = json.dumps(fixture_config("dflash"))
    broken = fixture_config("dflash")
    broken["speculators_config"]["proposal_methods"][0]["speculative_tokens"] = 9  # block 16 wants 15
    root = registry_with(
        tmp_path,
        {
            "org/draft.toml": MINIMAL,
            "org/draft.config.json": good,
            "org/bad.toml": MINIMAL.replace("org/draft", "org/bad"),
            "org/bad.config.json": json.dumps(broken),
        },
    )
    report = entries.check(root)
    assert [(Path(f).name, p.message.split(":")[0]) for f, p in report.problems] == [
        ("bad.config.json", "draft-length-mismatch")
    ]


def test_a_snapshot_must_match_its_pin(tmp_path):
    text = MINIMAL.replace(
        'status = "unpinned"', f'status = "pinned"\nrevision = "{"a" * 40}"\nconfig_sha256 = "{"b" * 64}"'
    )
    root = registry_with(
        tmp_path, {"org/draft.toml": text, "org/draft.config.json": json.dumps(fixture_config("dflash"))}
    )
    ((file, p),) = entries.check(root).problems
    assert file.endswith("draft.config.json") and "is not the pinned config_sha256" in p.message


# -- load() attaches the entry --------------------------------------------------------------------

REPO = "org/draft"
CONFIG = json.dumps(fixture_config("dflash")).encode()


def pinned_entry(revision, sha):
    return MINIMAL.replace(
        'status = "unpinned"', f'status = "pinned"\nrevision = "{revision}"\nconfig_sha256 = "{sha}"'
    )


def test_load_attaches_the_matching_entry(hub, tmp_path, monkeypatch):
    commit = hub.add(REPO, {"config.json": CONFIG})
    monkeypatch.setenv(
        "SPECREG_REGISTRY",
        str(registry_with(tmp_path, {"org/draft.toml": pinned_entry(commit, hashlib.sha256(CONFIG).hexdigest())})),
    )
    spec = specreg.load(REPO)
    assert spec.catalog.id == REPO and spec.catalog.status == "pinned"
    assert not {"catalog-pin-mismatch", "catalog-other-revision"} & {f.code for f in spec.findings}
    assert spec.to_dict()["catalog"]["id"] == REPO
    hub.add("org/unlisted", {"config.json": CONFIG})
    assert specreg.load("org/unlisted").catalog is None


def test_a_changed_repository_under_a_pin_is_an_error(hub, tmp_path, monkeypatch):
    old = hub.add(REPO, {"config.json": CONFIG})
    changed = json.loads(CONFIG)
    changed["speculators_version"] = "0.9.1"
    new = hub.add(REPO, {"config.json": json.dumps(changed).encode()})
    monkeypatch.setenv(
        "SPECREG_REGISTRY",
        str(registry_with(tmp_path, {"org/draft.toml": pinned_entry(old, hashlib.sha256(CONFIG).hexdigest())})),
    )
    spec = specreg.load(REPO)  # main now points at the new commit
    found = {f.code: f for f in spec.findings}
    assert found["catalog-pin-mismatch"].severity == "error"
    assert found["catalog-other-revision"].severity == "info" and new in found["catalog-other-revision"].message
    assert not spec.servable
    at_pin = specreg.load(f"{REPO}@{old}")
    assert not {"catalog-pin-mismatch", "catalog-other-revision"} & {f.code for f in at_pin.findings}


def test_the_same_content_at_another_revision_is_only_info(hub, tmp_path, monkeypatch):
    old = hub.add(REPO, {"config.json": CONFIG}, commit="a" * 40)
    hub.add(REPO, {"config.json": CONFIG, "README.md": b"x"}, commit="b" * 40)
    monkeypatch.setenv(
        "SPECREG_REGISTRY",
        str(registry_with(tmp_path, {"org/draft.toml": pinned_entry(old, hashlib.sha256(CONFIG).hexdigest())})),
    )
    codes = [f.code for f in specreg.load(REPO).findings]
    assert "catalog-other-revision" in codes and "catalog-pin-mismatch" not in codes


def test_a_malformed_entry_is_a_warning_not_a_crash(hub, tmp_path, monkeypatch):
    hub.add(REPO, {"config.json": CONFIG})
    monkeypatch.setenv("SPECREG_REGISTRY", str(registry_with(tmp_path, {"org/draft.toml": "id = 3\n"})))
    spec = specreg.load(REPO)
    assert spec.catalog is None
    assert "catalog-entry-invalid" in [f.code for f in spec.findings]


# -- pin ------------------------------------------------------------------------------------------

COMMENTED = "# a hand-written comment that pin must keep\n" + MINIMAL + "\n# trailing note\n"


def test_pin_writes_revision_and_sha_and_keeps_the_rest(hub, tmp_path):
    commit = hub.add(REPO, {"config.json": CONFIG})
    root = registry_with(tmp_path, {"org/draft.toml": COMMENTED})
    r = run("catalog", "pin", REPO, "--registry", str(root))
    assert r.returncode == 0, r.stderr
    assert f"pinned {REPO} at {commit}" in r.stdout
    text = (root / "org" / "draft.toml").read_text()
    assert text.startswith("# a hand-written comment that pin must keep\n")
    assert "# trailing note" in text
    entry = entries.lookup(REPO, root)
    assert (entry.status, entry.revision, entry.config_sha256) == ("pinned", commit, hashlib.sha256(CONFIG).hexdigest())
    assert (root / "org" / "draft.config.json").read_bytes() == CONFIG
    assert entries.check(root).problems == ()
    again = run("catalog", "pin", REPO, "--registry", str(root))
    assert "already pinned" in again.stdout and (root / "org" / "draft.toml").read_text() == text


def test_pin_refuses_changed_content_at_the_pinned_revision(hub, tmp_path):
    commit = "c" * 40
    hub.add(REPO, {"config.json": CONFIG}, commit=commit)
    root = registry_with(tmp_path, {"org/draft.toml": pinned_entry(commit, "d" * 64)})
    before = (root / "org" / "draft.toml").read_bytes()
    r = run("catalog", "pin", REPO, "--registry", str(root))
    assert r.returncode == 2
    assert "the content changed under the pin; nothing was written" in r.stderr
    assert (root / "org" / "draft.toml").read_bytes() == before
    assert not (root / "org" / "draft.config.json").exists()


def test_pin_to_an_explicit_revision_repins(hub, tmp_path):
    old = hub.add(REPO, {"config.json": CONFIG}, commit="c" * 40)
    new = hub.add(REPO, {"config.json": CONFIG + b" "}, ref="v2")
    root = registry_with(tmp_path, {"org/draft.toml": pinned_entry(old, hashlib.sha256(CONFIG).hexdigest())})
    done = entries.pin(REPO, revision="v2", directory=root)
    assert (done.revision, done.previous_revision, done.changed) == (new, old, True)
    assert entries.lookup(REPO, root).config_sha256 == hashlib.sha256(CONFIG + b" ").hexdigest()


def test_pin_of_an_unknown_entry_or_repo_is_a_clear_error(hub, tmp_path):
    root = registry_with(tmp_path, {"org/draft.toml": MINIMAL})
    r = run("catalog", "pin", "org/nothing", "--registry", str(root))
    assert r.returncode == 2 and "no catalog entry org/nothing" in r.stderr
    r = run("catalog", "pin", REPO, "--registry", str(root))
    assert r.returncode == 2 and "no repository org/draft" in r.stderr
    assert (root / "org" / "draft.toml").read_text() == MINIMAL


# -- list and show ---------------------------------------------------------------------------------


def test_list_table_filters_and_json():
    r = run("catalog", "list", "--algorithm", "dspark")
    assert r.returncode == 0
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["id", "algorithm", "verifier", "k", "status", "baselines", "AL"]
    tables = map(tomllib.loads, map(Path.read_text, SHIPPED.rglob("*.toml")))
    dspark = sorted(t["id"] for t in tables if t["algorithm"] == "dspark")
    assert len(dspark) == 32 and sorted(line.split()[0] for line in lines[1:]) == dspark
    assert all(" dspark " in line for line in lines[1:])
    r = run("catalog", "list", "--verifier", "Qwen/Qwen3-8B", "--json")
    doc = json.loads(r.stdout)
    assert {e["verifier"]["id"] for e in doc} == {"Qwen/Qwen3-8B"}
    zlab = next(e for e in doc if e["id"] == "z-lab/Qwen3-8B-DFlash-b16")
    assert [b["harness"].get("dataset") for b in zlab["baselines"]] == ["mt-bench-h4", "humaneval", "gsm8k", "gsm8k"]
    assert zlab["baselines"][3]["metrics"]["acceptance_length"] == {"floor": 3.5}


def test_show_prints_baselines_and_suggests_a_close_id():
    r = run("catalog", "show", "RedHatAI/Qwen3-8B-speculator.eagle3")
    assert r.returncode == 0
    assert "AL        2.26 [within ±5%]" in r.stdout
    assert "per-pos   0.6541 / 0.3993 / 0.202" in r.stdout
    r = run("catalog", "show", "RedHatAI/Qwen3-8B-speculator.eagle33")
    assert r.returncode == 2
    assert r.stderr == (
        "error: no catalog entry RedHatAI/Qwen3-8B-speculator.eagle33 "
        "(did you mean RedHatAI/Qwen3-8B-speculator.eagle3?)\n"
    )


def test_show_names_a_pinned_entry_and_its_one_baseline_in_plain_words(hub, tmp_path):
    """The line read "(pinned, pinned at ...; 1 baselines: ...)"."""
    commit = hub.add(REPO, {"config.json": CONFIG})
    baseline = (ROOT / "registry" / "RedHatAI" / "Llama-3.1-8B-Instruct-speculator.eagle3.toml").read_text()
    entry = MINIMAL.replace('status = "unpinned"', "")
    entry = (
        f'status = "pinned"\nrevision = "{commit}"\nconfig_sha256 = "{hashlib.sha256(CONFIG).hexdigest()}"\n'
        + entry
        + baseline[baseline.index("[[baselines]]") :]
    )
    reg = registry_with(tmp_path, {"org/draft.toml": entry})
    r = run("show", REPO, env={"SPECREG_REGISTRY": str(reg)})
    assert r.returncode == 0, r.stderr
    assert (
        f"  catalog       org/draft (pinned at {commit[:12]}; 1 baseline: specreg catalog show org/draft)\n" in r.stdout
    )


def test_show_names_the_catalog_entry(hub, tmp_path):
    hub.add(REPO, {"config.json": CONFIG})
    reg = registry_with(tmp_path, {"org/draft.toml": MINIMAL})
    r = run("show", REPO, env={"SPECREG_REGISTRY": str(reg)})
    assert r.returncode == 0, r.stderr
    assert "  catalog       org/draft (unpinned; 0 baselines: specreg catalog show org/draft)" in r.stdout


@pytest.mark.parametrize(
    ("line", "path", "words"),
    [
        ('tags = "vllm-ci"', "$.tags", 'expected a list of strings, got "vllm-ci"'),
        ("license = 5", "$.license", "expected a string, got 5"),
        ("license = " + "9" * 5000, "$", "invalid TOML: Exceeds the limit"),
    ],
)
def test_catalog_values_are_taken_as_written_never_coerced(tmp_path, line, path, words):
    from specreg.entries import check

    (tmp_path / "org").mkdir()
    (tmp_path / "org" / "x.toml").write_text(
        f'id = "org/x"\nalgorithm = "dflash"\nstatus = "unpinned"\n{line}\n\n[verifier]\nid = "Qwen/Qwen3-8B"\n'
    )
    problems = [p for _f, p in check(tmp_path).problems]
    assert any(p.path == path and words in p.message for p in problems), problems


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_a_non_finite_baseline_number_is_a_problem(tmp_path, value):
    from specreg.entries import check

    (tmp_path / "org").mkdir()
    (tmp_path / "org" / "x.toml").write_text(
        'id = "org/x"\nalgorithm = "dflash"\nstatus = "unpinned"\n\n[verifier]\nid = "Qwen/Qwen3-8B"\n\n'
        f'[[baselines]]\nkind = "published"\nsource = "s"\n[baselines.harness]\ndataset = "gsm8k"\n'
        f"[baselines.metrics.acceptance_length]\nvalue = {value}\n"
    )
    problems = [p for _f, p in check(tmp_path).problems]
    assert any(p.path == "$.baselines[0].metrics.acceptance_length.value" and "finite" in p.message for p in problems)
