"""The field ledger of native configs: every key of a z-lab DFlash, DSpark or native EAGLE-3 file's top
level, dflash_config and eagle_config is accounted for, against what specreg reads and what the layout's
known writers write (specreg/sources/native/facts/, read from each trainer's code); a key none of them
writes is an `unknown-field` warning naming them (issue 56)."""

from __future__ import annotations

import json

import pytest

import specreg
from conftest import DATA, codes
from specreg import facts
from specreg.normalization import ledger
from specreg.sources.native import trainers

VLLM = facts.known()[-1]
NATIVE = DATA / "native"
#: every servable native fixture, and the real files of the trainers whose writers are read (SpecForge's
#: 45 configs, AngelSlim's DFlash one); the refused layouts (Domino, P-EAGLE, DFlare) have no plan
SERVED = sorted(
    str(p.relative_to(DATA))[: -len(".json")]
    for p in [
        *NATIVE.glob("*.json"),
        *(DATA / "real" / "specforge").glob("*.json"),
        DATA / "real" / "angelslim" / "qwen3_dflash.json",
    ]
    if not any(refused in p.stem for refused in ("domino", "peagle"))
)


def load(name: str) -> dict:
    path = DATA / f"{name}.json" if "/" in name else NATIVE / f"{name}.json"
    return json.loads(path.read_text(encoding="utf-8"))


def statuses(spec) -> dict[str, str]:
    return {e.path: e.status for e in spec.ledger}


@pytest.mark.parametrize("name", SERVED)
def test_every_key_of_a_real_trainer_output_is_accounted_for_and_nothing_flagged(name):
    config = load(name)
    spec = specreg.normalize(config, vllm=VLLM, verifier="Qwen/Qwen3-8B")
    found = statuses(spec)
    keys = {f"$.{k}" for k in config} | {
        f"$.{obj}.{k}" for obj in ("dflash_config", "eagle_config") for k in config.get(obj) or {}
    }
    assert set(found) == keys  # every key there, once
    assert not set(found.values()) & ledger.FLAGGED, {p: s for p, s in found.items() if s in ledger.FLAGGED}
    assert not {"unknown-field", "trainer-field-ignored"} & set(codes(spec))


def test_an_added_top_level_key_no_writer_writes_is_an_unknown_field_naming_the_writers():
    config = load("specforge_qwen3_4b_eagle3")
    config["draft_head_variant"] = "gru"
    spec = specreg.normalize(config, vllm=VLLM, verifier="Qwen/Qwen3-4B")
    assert statuses(spec)["$.draft_head_variant"] == "unknown"
    (finding,) = [f for f in spec.findings if f.code == "unknown-field"]
    assert finding.path == "$.draft_head_variant" and finding.severity == "warning"
    for trainer in trainers.writers("eagle3-native"):
        assert trainers.label(trainer) in finding.message


def test_an_added_eagle_config_key_is_flagged_and_a_writers_key_at_its_default_is_the_trainers():
    config = load("modelopt_eagle3_llama4_maverick")
    config["eagle_config"]["next_layer_regular"] = True  # ModelOpt's template value (hf_spec_configs.py)
    config["eagle_config"]["eagle_gru_head"] = True
    spec = specreg.normalize(config, vllm=VLLM, verifier="meta-llama/Llama-4-Maverick-17B-128E-Instruct")
    found = statuses(spec)
    assert found["$.eagle_config.next_layer_regular"] == "trainer"
    assert found["$.eagle_config.eagle_gru_head"] == "unknown"
    assert [f.path for f in spec.findings if f.code == "unknown-field"] == ["$.eagle_config.eagle_gru_head"]


def test_a_writers_key_at_another_value_than_its_code_states_is_trainer_field_ignored():
    config = load("modelopt_eagle3_llama4_maverick")
    config["eagle_config"]["next_layer_regular"] = False
    spec = specreg.normalize(config, vllm=VLLM, verifier="meta-llama/Llama-4-Maverick-17B-128E-Instruct")
    assert statuses(spec)["$.eagle_config.next_layer_regular"] == "ignored"
    (finding,) = [f for f in spec.findings if f.code == "trainer-field-ignored"]
    assert "next_layer_regular = false" in finding.message and "ModelOpt export" in finding.message


def test_a_dflash_config_key_the_converter_already_warned_about_is_unknown_once():
    config = load("zlab_dflash_qwen3_8b_fixture")
    config["dflash_config"]["prefix_gru_layers"] = 2
    spec = specreg.normalize(config, vllm=VLLM, verifier="Qwen/Qwen3-8B")
    assert statuses(spec)["$.dflash_config.prefix_gru_layers"] == "unknown"
    at = [f.code for f in spec.findings if f.path == "$.dflash_config.prefix_gru_layers"]
    assert at == ["unknown-trained-key"]


def test_show_fields_prints_a_native_configs_ledger(capsys):
    from specreg.cli.main import main

    path = NATIVE / "zlab_dflash_qwen3_8b_fixture.json"
    assert main(["show", str(path), "--fields", "--vllm", VLLM, "--verifier", "Qwen/Qwen3-8B"]) == 0
    out = capsys.readouterr().out
    assert "no ledger" not in out
    head = next(line for line in out.splitlines() if line.startswith("fields: "))
    assert "every one accounted for" in head and "read" in head


@pytest.mark.parametrize("form", ["speculators", "native"])
def test_many_unknown_keys_list_the_first_twenty_then_count_the_rest_and_the_entries_stay_capped(form, variant):
    """Both ledgers share one tally: 30 unknown keys give 20 entries and warnings, then one entry and one
    warning counting the other 10. 3,000 layer keys (a speculators file's transformer_layer_config; a native
    file's unknown keys are all flagged, so counted above) leave MAX_ENTRIES entries and one counting the rest."""
    if form == "speculators":
        config, verifier = variant("dflash"), None
    else:
        config, verifier = load("specforge_qwen3_4b_eagle3"), "Qwen/Qwen3-4B"
    for i in range(30):
        config[f"hand_field_{i:02d}"] = i
    spec = specreg.normalize(config, vllm=VLLM, verifier=verifier)
    unknown = [e for e in spec.ledger if e.status == "unknown"]
    assert [e.path for e in unknown[:20]] == [f"$.hand_field_{i:02d}" for i in range(20)]
    assert len(unknown) == 21 and unknown[20] == ledger.FieldEntry(
        "$.hand_field_20", "unknown", "and 10 more unknown keys from here on, not listed"
    )
    warned = [f for f in spec.findings if f.code == "unknown-field"]
    assert len(warned) == 21 and warned[-1].message.startswith("10 more keys are unknown fields like the ones above")
    if form == "native":
        return
    config["transformer_layer_config"].update({f"k{i}": i for i in range(3_000)})
    capped = specreg.normalize(config, vllm=VLLM, verifier=verifier).ledger
    assert len(capped) == ledger.MAX_ENTRIES + 1 and capped[-1].note.endswith("more keys from here on, not listed")
