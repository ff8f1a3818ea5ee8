"""The transformers facts (specreg/transformers/facts/<version>.json) are transformers' own answer: the
command regenerates each committed file byte for byte, from the transformers installed beside the engine
and from the newest committed release's wheel (downloaded by pip: network to PyPI), and the claim behind
the composite table (no top-level vocab_size, so vLLM's draft classes cannot read one) is shown on a real
config object."""

import sys

import pytest

from specreg import transformers
from specreg.transformers import refresh

pytestmark = pytest.mark.engine


def test_refresh_from_the_installed_transformers_is_its_committed_file(tmp_path):
    import transformers as installed

    assert installed.__version__ in transformers.known()
    written = refresh.refresh(None, None, sys.executable, tmp_path)
    committed = transformers.FOLDER / f"{installed.__version__}.json"
    assert written.read_bytes() == committed.read_bytes()


def test_refresh_from_the_newest_wheel_is_its_committed_file(tmp_path):
    newest = transformers.known()[-1]
    written = refresh.refresh(newest, None, sys.executable, tmp_path)
    assert written.read_bytes() == (transformers.FOLDER / f"{newest}.json").read_bytes()


def test_a_qwen2_5_vl_draft_config_has_no_vocab_size_for_vllm_to_read():
    from transformers import AutoConfig

    config = AutoConfig.for_model("qwen2_5_vl", vocab_size=151936, hidden_size=2048, num_hidden_layers=1)
    assert type(config).__name__ == "Qwen2_5_VLConfig" and not hasattr(config, "vocab_size")
    text = AutoConfig.for_model("qwen2", vocab_size=151936, hidden_size=2048, num_hidden_layers=1)
    assert text.vocab_size == 151936
