"""A vLLM release older than the oldest with facts: one finding says so, each rule the plan asked is named
as not known, and nothing is refused or passed on an edge the facts do not hold (issue 58 part 1)."""

from __future__ import annotations

import json

from packaging.version import Version

import specreg
import tiny
from conftest import DATA, fixture_config
from specreg import facts
from specreg.normalization import capabilities
from specreg.vllm import attention
from specreg.vllm.preflight import preflight


def _minor_before(release: str) -> str:
    v = Version(release)
    return f"{v.major}.{v.minor - 1}"


BELOW = _minor_before(facts.known()[0])  # a release older than every known one
#: older than every release whose wheel was read at all (older_releases.json starts at the first release
#: with the speculators format): nothing is known there but the typed rules
FAR = _minor_before((facts.older_releases() or facts.known())[0])


def codes(spec):
    return [f.code for f in spec.findings]


def test_below_the_oldest_release_a_rule_is_not_known_unless_typed_older_than_every_release():
    typed = {r: m["since"] for r, m in facts.metadata().items() if "since" in m}
    untyped = sorted(set(facts.metadata()) - set(typed))
    assert typed and untyped
    for rule in untyped:
        assert facts.state(rule, FAR) is None, rule
        # planned as the oldest known release has it: never "needs the oldest release" for a start not seen
        assert facts.holds(rule, FAR) == facts.holds(rule, facts.known()[0]), rule
    for rule, since in typed.items():
        v = Version(since)
        assert facts.state(rule, since) is True
        before = f"{v.major}.{v.minor}.{v.micro - 1}" if v.micro else _minor_before(since)
        assert facts.state(rule, before) is not True, rule  # its wheel's own false, where it was read
        assert facts.state(rule, FAR) is None, rule
    for rule in untyped:  # inside the facts every rule is known
        assert facts.state(rule, facts.known()[0]) is not None


def test_a_typed_edge_refuses_nothing_a_wheel_did_not_say_and_a_native_layout_is_never_refused_below_the_facts():
    # algorithm_eagle3's typed edge is when vLLM read the speculators *format*, not when it first served
    # Eagle-3: a native EAGLE-3 file (served by its registry class) is "not known" below the facts
    since = Version(facts.metadata()["algorithm_eagle3"]["since"])
    before = f"{since.major}.{since.minor}.{since.micro - 1}" if since.micro else _minor_before(str(since))
    native = json.loads((DATA / "native" / "eagle3_release_llama3_70b.json").read_text())
    spec = specreg.normalize(native, vllm=before, verifier="meta-llama/Llama-3.3-70B-Instruct")
    assert "vllm-unsupported-algorithm" not in codes(spec)
    (found,) = [f for f in spec.findings if f.code == "vllm-before-facts"]
    assert found.severity == "warning" and "algorithm_eagle3" in found.message
    assert facts.known()[0] in found.message
    # the speculators format itself: refused there only where that release's own wheel says so
    spec = specreg.normalize(fixture_config("eagle3_converted"), vllm=before)
    read = facts.state("algorithm_eagle3", before)
    assert ("vllm-unsupported-algorithm" in codes(spec)) is (read is False)
    spec = specreg.normalize(fixture_config("eagle3_converted"), vllm=FAR)
    assert "vllm-unsupported-algorithm" not in codes(spec)


def test_a_rule_read_from_an_older_wheel_is_answered_and_not_listed_as_unknown():
    assert facts.older_releases()
    release = facts.older_releases()[-1]
    spec = specreg.normalize(fixture_config("dflash"), vllm=release)
    read = facts.state("algorithm_dflash", release)
    assert read is not None
    assert ("vllm-unsupported-algorithm" in codes(spec)) is (not read)
    (found,) = [f for f in spec.findings if f.code == "vllm-before-facts"]
    assert "algorithm_dflash" not in found.message.partition("not known for ")[2]


def test_an_algorithm_the_oldest_release_serves_is_not_known_below_it_and_one_it_starts_later_is_refused():
    oldest = facts.known()[0]
    spec = specreg.normalize(fixture_config("dflash"), vllm=FAR)
    assert facts.holds("algorithm_dflash", oldest)
    assert spec.servable and "vllm-unsupported-algorithm" not in codes(spec)
    (found,) = [f for f in spec.findings if f.code == "vllm-before-facts"]
    named = found.message.partition("not known for ")[2]
    assert "algorithm_dflash" in named and "dflash_causal_layers" in named
    # DSpark starts after the oldest release (a start the facts saw): still refused, and not "not known"
    assert not facts.holds("algorithm_dspark", oldest)
    spec = specreg.normalize(fixture_config("dspark_generated"), vllm=FAR)
    assert "vllm-unsupported-algorithm" in codes(spec)
    assert "algorithm_dspark" not in next(f for f in spec.findings if f.code == "vllm-before-facts").message


def test_inside_the_facts_there_is_no_such_finding():
    for release in (facts.known()[0], facts.known()[-1]):
        assert "vllm-before-facts" not in codes(specreg.normalize(fixture_config("dflash"), vllm=release))


def test_check_gpu_before_the_attention_facts_answers_the_rest_and_says_what_it_cannot(tmp_path):
    c = tiny.draft_config("dflash")
    c["transformer_layer_config"]["head_dim"] = 128  # a head size the attention facts cover
    draft, ver = tiny.write_pair(tmp_path, "dflash", config=c)
    older = _minor_before(attention.versions()[0])
    spec = preflight(specreg.load(draft, vllm=older), verifier=str(ver), gpu="H100", check_weights=False)
    (found,) = [f for f in spec.findings if f.code == "gpu-facts-unknown"]
    assert found.severity == "warning" and attention.versions()[0] in found.message
    assert spec.checks.verifier is not None and spec.checks.gpu is None
    inside = preflight(
        specreg.load(draft, vllm=attention.versions()[0]), verifier=str(ver), gpu="H100", check_weights=False
    )
    assert inside.checks.gpu is not None and "gpu-facts-unknown" not in codes(inside)


def test_a_verifier_before_the_aux_capture_table_is_unknown_not_passed(tmp_path):
    read = capabilities.aux_capture_releases()
    c = tiny.draft_config("eagle3")
    draft, ver = tiny.write_pair(tmp_path, "eagle3", config=c)
    older = _minor_before(read[0])
    assert capabilities.aux_capture(older) is None
    spec = preflight(specreg.load(draft, vllm=older), verifier=str(ver), check_weights=False)
    assert "verifier-aux-capture-unknown" in codes(spec) and "verifier-no-aux-capture" not in codes(spec)
    spec = preflight(specreg.load(draft, vllm=read[0]), verifier=str(ver), check_weights=False)
    assert "verifier-aux-capture-unknown" not in codes(spec)
    # a verifier class that does not capture is refused inside the table as before
    v = json.loads((ver / "config.json").read_text())
    v["architectures"] = ["NoSuchForCausalLM"]
    (ver / "config.json").write_text(json.dumps(v))
    spec = preflight(specreg.load(draft, vllm=read[0]), verifier=str(ver), check_weights=False)
    assert "verifier-no-aux-capture" in codes(spec)


def test_the_older_releases_table_has_every_rule_for_every_release_it_read():
    table = json.loads((facts.FOLDER / facts.OLDER).read_text())
    assert table["releases"] == list(facts.older_releases())
    assert Version(table["releases"][-1]) < Version(facts.known()[0])
    assert set(table["rules"]) == set(facts.metadata())
    for rule, per_release in table["rules"].items():
        assert list(per_release) == table["releases"], rule
        for release, value in per_release.items():
            assert isinstance(value, bool) or (value["extractable"] is False and value["why"]), (rule, release)
            assert facts.state(rule, release) == (value if isinstance(value, bool) else None) or (
                "since" in facts.metadata()[rule]
            ), (rule, release)


def test_serve_gpu_before_the_attention_facts_serves_without_the_gpus_settings_and_says_so(tmp_path):
    """It stopped with "no attention-backend facts for vLLM X": a refusal nothing backs."""
    from specreg.api.serve import serve_plan

    c = tiny.draft_config("dflash")
    c["transformer_layer_config"]["head_dim"] = 128
    draft, ver = tiny.write_pair(tmp_path, "dflash", config=c)
    older = _minor_before(attention.versions()[0])
    plan = serve_plan(specreg.load(draft, vllm=older), verifier=str(ver), gpu="H100", config_only=True)
    said = [n for n in plan.notes if n.startswith("gpu: ")]
    assert len(said) == 1 and attention.versions()[0] in said[0] and "nothing for this GPU is written" in said[0]
    inside = serve_plan(
        specreg.load(draft, vllm=attention.versions()[0]), verifier=str(ver), gpu="H100", config_only=True
    )
    assert not any("nothing for this GPU is written" in n for n in inside.notes)
