"""The field ledger: every key of a speculators-format config is accounted for, and a key that no reader
reads and no known speculators release writes, or that a release writes at another value than its default
where vLLM does not read it, is a warning (issue 56)."""

from __future__ import annotations

import json

import pytest
from packaging.version import Version

import specreg
from conftest import DATA, codes
from specreg import facts, speculators
from specreg.normalization import ledger
from specreg.normalization.capabilities import short

#: the newest vLLM release with facts, and how findings name it
VLLM = facts.known()[-1]
LABEL = f"vLLM {short(Version(VLLM))}"


def statuses(spec):
    return {e.path: e.status for e in spec.ledger}


def test_the_shipped_example_has_every_key_accounted_for_and_nothing_flagged():
    cfg = json.loads((DATA.parent.parent / "examples" / "qwen3-8b-dflash" / "config.json").read_text(encoding="utf-8"))
    spec = specreg.normalize(cfg)
    found = statuses(spec)
    assert not {s for s in found.values()} & ledger.FLAGGED
    assert found["$.speculators_config.verifier.architectures"] == "trainer"
    assert found["$.transformer_layer_config.rms_norm_eps"] == "layer"
    assert found["$.block_size"] == "read"
    # every key at every level the ledger walks is there once
    assert len(found) == len(spec.ledger)
    assert "$.transformer_layer_config" in found and "$.speculators_config.proposal_methods[0].proposal_type" in found


def test_dominos_projector_fields_on_a_dflash_draft_are_each_a_warning(variant):
    # speculators' Domino projector (a development branch): a GRU correction head and shifted labels
    cfg = variant(
        "dflash",
        projector_type="domino",
        shift_label=True,
        gru_hidden_dim=1024,
        emb_dim=256,
        speculators_version="0.10.0.dev0",
    )
    spec = specreg.normalize(cfg, vllm=VLLM)
    unknown = [f for f in spec.findings if f.code == "unknown-field"]
    assert [f.path for f in unknown] == ["$.projector_type", "$.shift_label", "$.gru_hidden_dim", "$.emb_dim"]
    assert all(f.severity == "warning" for f in unknown)
    first = unknown[0].message
    assert first.startswith('projector_type = "domino" is not a field dflash is known to have')
    assert (
        f"speculators 0.10.0.dev0, newer than any release specreg knows ({speculators.known()[0]} to {speculators.known()[-1]})"
        in first
    )
    assert LABEL in first
    assert statuses(spec)["$.shift_label"] == "unknown"


def test_a_newer_trainers_top_level_and_speculators_config_fields_are_warnings(variant):
    assert Version("0.12.0") > speculators.newest()  # the case: newer than every release with facts
    cfg = variant("dflash", speculators_version="0.12.0", draft_head_kind="tree", speculators_config__curriculum="v2")
    spec = specreg.normalize(cfg, vllm=VLLM)
    unknown = {f.path: f.message for f in spec.findings if f.code == "unknown-field"}
    assert set(unknown) == {"$.draft_head_kind", "$.speculators_config.curriculum"}
    assert all("the file says speculators 0.12.0, newer than" in m for m in unknown.values())
    assert specreg.normalize(variant("dflash", speculators_version="0.12.0"), vllm=VLLM).findings == tuple(
        f for f in spec.findings if f.code != "unknown-field"
    )


def test_an_unknown_field_in_a_file_of_a_known_release_says_hand_edited(variant):
    cfg = variant("dflash", my_note="x")
    assert cfg["speculators_version"] in speculators.known()
    spec = specreg.normalize(cfg, vllm=VLLM)
    (f,) = [f for f in spec.findings if f.code == "unknown-field"]
    assert (
        f"the file says speculators {cfg['speculators_version']}: edited by hand, or written by another tool"
        in f.message
    )


def test_a_trainer_field_vllm_does_not_read_at_another_value_than_its_default_is_a_warning(variant):
    # speculators' greedy proposal (0.7 and later) writes verifier_accept_k (default 1); specreg and
    # vLLM read only speculative_tokens there
    at_default = specreg.normalize(variant("dflash"), vllm=VLLM)
    assert statuses(at_default)["$.speculators_config.proposal_methods[0].verifier_accept_k"] == "trainer"
    spec = specreg.normalize(variant("dflash", speculators_config__proposal_methods__0__verifier_accept_k=3), vllm=VLLM)
    (f,) = [f for f in spec.findings if f.code == "trainer-field-ignored"]
    assert f.path == "$.speculators_config.proposal_methods[0].verifier_accept_k"
    assert f.message.startswith("verifier_accept_k = 3 was written by speculators (its default is 1")
    assert f"{LABEL} does not read it" in f.message


def test_configs_sharing_their_keys_share_one_plan_of_them_and_are_each_judged_by_their_own_values(variant):
    """The ledger plans an object's keys once per key set (`_object_steps`, cached); the values, which
    decide trainer against ignored and what a warning shows, are read on every call, in any order."""
    path = "$.speculators_config.proposal_methods[0].verifier_accept_k"
    before = ledger._object_steps.cache_info().hits
    for k, hand in ((3, 7), (1, 8), (5, 9)):
        spec = specreg.normalize(
            variant("dflash", speculators_config__proposal_methods__0__verifier_accept_k=k, hand_field=hand), vllm=VLLM
        )
        assert statuses(spec)[path] == ("trainer" if k == 1 else "ignored")
        ignored = [f.message for f in spec.findings if f.code == "trainer-field-ignored"]
        assert ignored == ([] if k == 1 else [ignored[0]]) and all(
            m.startswith(f"verifier_accept_k = {k} ") for m in ignored
        )
        (unknown,) = [f.message for f in spec.findings if f.code == "unknown-field"]
        assert unknown.startswith(f"hand_field = {hand} is not a field dflash")
    assert ledger._object_steps.cache_info().hits > before


def test_a_long_key_is_accounted_for_and_not_kept_in_a_cache_after_the_normalization(variant):
    """A 20,000-character key in the layer config is planned (a `layer` entry) without the caches that
    outlive a normalization: a hostile file's key must not stay in memory."""
    from specreg.normalization import plan

    specreg.normalize(variant("dflash"), vllm=VLLM)  # every ordinary object and field cached
    steps, copied = ledger._object_steps.cache_info().currsize, plan._copied_from.cache_info().currsize
    key = "k" * 20_000
    cfg = variant("dflash")
    cfg["transformer_layer_config"][key] = 1
    spec = specreg.normalize(cfg, vllm=VLLM)
    assert statuses(spec)[f"$.transformer_layer_config.{key}"] == "layer"
    assert spec.provenance[f"draft_config.{key}"].sources == (f"$.transformer_layer_config.{key}",)
    assert ledger._object_steps.cache_info().currsize == steps
    assert plan._copied_from.cache_info().currsize == copied


def test_a_near_miss_stays_an_unread_field_info_not_an_unknown_field(variant):
    from conftest import DROP

    spec = specreg.normalize(variant("dflash", sample_from_anchor=DROP, sample_from_anchr=True), vllm=VLLM)
    assert "unread-field" in codes(spec) and "unknown-field" not in codes(spec)
    assert statuses(spec)["$.sample_from_anchr"] == "near-miss"


@pytest.mark.parametrize("name", sorted(p.stem for p in (DATA / "speculators").glob("*.json")))
def test_configs_speculators_itself_generated_have_no_unknown_field(fx, name):
    spec = specreg.normalize(fx(name), vllm=VLLM)
    assert "unknown-field" not in codes(spec), [f.message for f in spec.findings if f.code == "unknown-field"]


def test_show_fields_prints_the_ledger_and_json_carries_it(capsys, tmp_path, variant):
    from specreg.cli.main import main

    path = tmp_path / "config.json"
    path.write_text(json.dumps(variant("dflash", shift_label=True)), encoding="utf-8")
    assert main(["show", str(path), "--fields", "--vllm", VLLM]) == 0
    lines = capsys.readouterr().out.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("fields: "))
    assert "1 unknown" in lines[head]
    assert any(line.split()[:2] == ["unknown", "$.shift_label"] for line in lines[head + 1 :])
    assert all(line == line.rstrip() for line in lines[head:])
    assert main(["show", str(path), "--json", "--vllm", VLLM]) == 0
    entries = {e["path"]: e for e in json.loads(capsys.readouterr().out)["ledger"]}
    assert entries["$.shift_label"]["status"] == "unknown" and entries["$.block_size"]["status"] == "read"


def test_what_a_releases_to_dict_lets_through_is_the_trainers(fx):
    # speculators 0.4.0's to_dict, under transformers 4.57, writes transformers' class attributes
    # base_model_ep_plan and has_no_defaults_at_init (read from the wheel: its facts' to_dict_keys)
    spec = specreg.normalize(fx("eagle3_v040_generated"), vllm=VLLM)
    entry = {e.path: e for e in spec.ledger}["$.base_model_ep_plan"]
    writes = [
        r
        for r in speculators.known()
        if "base_model_ep_plan" in (speculators.facts(r)["algorithms"].get("eagle3", {}).get("to_dict_keys") or ())
    ]
    assert "0.4.0" in writes
    assert entry.status == "trainer" and entry.note == f"speculators {writes[-1]}: written by to_dict(), no default"
