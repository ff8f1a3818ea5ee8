"""The SGLang tier: SGLang 0.5.23's own readers, run in one process on what specreg exports (and on the
unmodified files), must give specreg's trained plan: capture layers, per-layer (window, causal),
block/gamma and query rows, the resolved draft tokens, the fc width, every checkpoint tensor loaded.

Run it with `bash .ci/sglang-tier` (the venv: .ci/sglang-venv). SGLang's engine itself cannot run on
this CPU (DFLASH and DSPARK refuse it), so acceptance is out of reach here: docs/sglang.md."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import specreg
from specreg.normalization.speculator import thaw
from specreg.sglang import reading
from specreg.sglang.export import differences, export
from specreg.sglang.rules import rules

from sglang_tier import readers

pytestmark = pytest.mark.sglang

DATA = Path(__file__).resolve().parents[1] / "data"
CONFIGS = sorted(
    str(p.relative_to(DATA))
    for p in [*DATA.glob("speculators/*.json"), *DATA.glob("native/*.json"), *DATA.glob("real/*/*.json")]
)
RULES = rules()


def _served(name: str):
    try:
        spec = specreg.load(DATA / name)
    except specreg.ConfigError:
        return None, None
    return spec, export(spec)


def test_sglang_is_the_release_the_rules_were_read_from():
    import importlib.metadata

    assert importlib.metadata.version("sglang") == RULES["sglang"]


@pytest.mark.parametrize("name", CONFIGS)
def test_sglang_reads_the_export_as_trained(name, tmp_path):
    spec, plan = _served(name)
    if plan is None or not plan.servable:
        return  # refused by specreg or in SGLang's terms: tests/test_sglang.py holds why
    draft = tmp_path / "draft"
    draft.mkdir()
    (draft / "config.json").write_text(json.dumps(plan.config_dict()))
    got = readers.read(draft, spec.algorithm, plan.flags)
    assert differences(got, plan.trained) == []
    # the model of SGLang's readers specreg uses for `show` says the same as SGLang
    assert reading.read(plan.config_dict(), spec.algorithm, RULES, flags=readers.settings(plan.flags)) == got


@pytest.mark.parametrize("name", [n for n in CONFIGS if n.startswith(("native/", "real/"))])
def test_sglangs_reading_of_an_unmodified_file_is_the_one_show_reports(name, tmp_path):
    spec, plan = _served(name)
    if plan is None or spec.algorithm not in RULES["architectures"] or spec.errors:
        return  # refused by specreg itself (an invalid shape, ...): show reports that error, not SGLang's reading
    source = thaw(spec.source_config)
    draft = tmp_path / "draft"
    draft.mkdir()
    (draft / "config.json").write_text(json.dumps(source))
    got = readers.read(draft, spec.algorithm, (), target_layers=36)
    model = reading.read(source, spec.algorithm, RULES, target_layers=36)
    assert bool(got.refused) == bool(model.refused), (got.refused, model.refused)
    if not got.refused:
        assert got == model


def test_the_option_table_is_sglangs_parser():
    assert readers.option_dests(RULES["options"]) == RULES["options"]


def test_the_quantization_choices_are_sglangs():
    from sglang.srt.arg_groups.choices import QUANTIZATION_CHOICES

    assert RULES["quantization_choices"] == list(QUANTIZATION_CHOICES)


@pytest.mark.parametrize("layers, draft_layers", [(36, 5), (36, 1), (28, 3), (64, 8), (4, 2), (94, 5)])
def test_build_target_layer_ids_is_sglangs(layers, draft_layers):
    from sglang.srt.speculative.dflash_utils import build_target_layer_ids

    assert reading.build_target_layer_ids(layers, draft_layers) == build_target_layer_ids(layers, draft_layers)
