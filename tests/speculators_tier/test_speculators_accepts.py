"""The speculators library reads what `specreg convert` writes (pytest -m speculators; needs
`pip install speculators`, which brings torch).

For every native fixture: convert it, load the result with speculators'
`SpeculatorModelConfig.from_pretrained` (which validates it with pydantic and picks the config class
by speculators_model_type), and normalize speculators' own `to_dict()` of it back with specreg: the
draft must come out with the same method, draft length, attention plan and layer ids.
"""

import pytest

import specreg
from conftest import DATA, NO_TWIN

pytestmark = pytest.mark.speculators

NATIVE = DATA / "native"
CONVERTIBLE = sorted(p.name for p in NATIVE.glob("*.json") if p.name not in NO_TWIN)


@pytest.fixture(scope="module")
def speculators_config_class():
    try:
        from speculators import SpeculatorModelConfig
    except ImportError:  # the tier was asked for: say what it needs
        pytest.fail("the speculators tier needs the speculators library: pip install speculators", pytrace=False)
    return SpeculatorModelConfig


@pytest.mark.parametrize("name", CONVERTIBLE)
def test_speculators_reads_the_converted_config(tmp_path, name, speculators_config_class):
    out = specreg.convert(
        NATIVE / name, tmp_path / "out", verifier="Qwen/Qwen3-8B", weights="none", skip_verifier_check=True
    )
    theirs = speculators_config_class.from_pretrained(str(out.directory))
    ours = specreg.load(out.directory, vllm="0.33")
    assert theirs.speculators_model_type == ours.algorithm
    assert theirs.speculators_config.proposal_methods[0].speculative_tokens == ours.num_speculative_tokens
    again = specreg.normalize(theirs.to_dict(), vllm="0.33")
    assert again.method == ours.method
    assert again.num_speculative_tokens == ours.num_speculative_tokens
    assert again.attention == ours.attention
    for key in ("eagle_aux_hidden_state_layer_ids", "dflash_config", "target_layer_ids", "mask_token_id"):
        assert again.draft_config.get(key) == ours.draft_config.get(key), key
