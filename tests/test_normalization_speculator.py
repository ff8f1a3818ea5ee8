"""specreg/normalization/speculator.py: the Speculator value users serialize."""

import json

import pytest

import specreg


def test_the_python_api_gives_plain_dicts_where_users_serialize(fx):
    spec = specreg.normalize(fx("dflash2"), vllm="0.33")
    with pytest.raises(TypeError):
        json.dumps(spec.draft_config)  # read-only views of a frozen value
    assert json.loads(json.dumps(spec.draft_config_dict())) == spec.draft_config_dict()
    assert json.loads(json.dumps(spec.speculative_config_dict())) == {"method": "dflash", "num_speculative_tokens": 15}
    assert json.loads(json.dumps(spec.to_dict()))["draft_config"] == spec.draft_config_dict()
    kwargs = spec.llm_kwargs(draft="/d")
    assert type(json.loads(json.dumps(kwargs))) is dict and kwargs.env == {"VLLM_USE_V2_MODEL_RUNNER": "1"}
