"""What an algorithm plugin (a module of another package) is written with: the names `specreg`
exports, its own namespaced finding codes, and clear errors that name the plugin when it misuses
the API (issue 27)."""

import subprocess
import sys

import pytest

import specreg
from specreg.normalization import algorithms, findings


def envelope(algorithm: str) -> dict:
    return {"speculators_model_type": algorithm, "architectures": ["X"],
            "speculators_config": {"algorithm": algorithm, "verifier": {"name_or_path": "org/v"},
                                   "proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": 3}],
                                   "default_proposal_method": "greedy"},
            "transformer_layer_config": {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
                                         "num_key_value_heads": 4, "num_hidden_layers": 1, "vocab_size": 128}}


@pytest.fixture
def plugin(monkeypatch):
    """Register a plugin algorithm (as another package's module would), removed afterwards."""
    monkeypatch.setattr(algorithms, "_registered", dict(algorithms._registered))
    monkeypatch.setattr(findings, "CODES", dict(findings.CODES))

    def register(name, body):
        body.__module__ = "my_plugin.algos"
        body.__qualname__ = "normalize"
        specreg.register_speculator(name, method="eagle3")(body)
        return name
    return register


def test_specreg_exports_what_an_algorithm_module_needs():
    for name in ("Plan", "Context", "Fields", "Kind", "POS_INT", "NONNEG_INT", "COUNT", "BOOL", "STR", "NUMBER",
                 "LAYER_IDS", "STR_LIST", "check_layer_ids", "register_speculator", "register_finding"):
        assert name in specreg.__all__ and getattr(specreg, name) is not None, name


def test_a_plugin_declares_its_own_namespaced_finding_code(plugin):
    specreg.register_finding("my-plugin/head-too-wide", "warning", "the head is wider than the verifier's")

    def body(cfg, ctx):
        plan = specreg.Plan()
        layer = cfg.obj("transformer_layer_config", required=True)
        plan.base(layer.raw_dict() if hasattr(layer, "raw_dict") else {}, "$.transformer_layer_config")
        plan.copy("num_speculative_tokens", ctx.envelope.num_speculative_tokens, "$.speculators_config")
        plan.copy("speculative_config.method", "eagle3", "$.speculators_model_type")
        plan.find("my-plugin/head-too-wide", "64 > 32", "$.transformer_layer_config.hidden_size")
        cfg.done()
        return plan

    plugin("unit-plugin-ok", body)
    spec = specreg.normalize(envelope("unit-plugin-ok"), vllm="0.33")
    (f,) = [f for f in spec.findings if f.code == "my-plugin/head-too-wide"]
    assert f.severity == "warning" and f.path == "$.transformer_layer_config.hidden_size"


@pytest.mark.parametrize("code, words", [
    ("head-too-wide", "namespaced"), ("MyPlugin/x", "namespaced"), ("my-plugin/x", None)])
def test_plugin_codes_are_namespaced(plugin, code, words):
    if words is None:
        assert specreg.register_finding(code, "info", "t").code == code
        with pytest.raises(specreg.RegistryError, match="another meaning"):
            specreg.register_finding(code, "error", "t")
        return
    with pytest.raises(specreg.RegistryError, match=words):
        specreg.register_finding(code, "warning", "t")


def test_an_unknown_code_or_a_misused_plan_is_an_error_naming_the_plugin(plugin):
    def unknown(cfg, ctx):
        plan = specreg.Plan()
        plan.find("not-registered", "x")
        return plan

    def assigns(cfg, ctx):
        plan = specreg.Plan()
        plan.num_speculative_tokens = 3
        return plan

    plugin("unit-plugin-unknown", unknown)
    plugin("unit-plugin-assigns", assigns)
    with pytest.raises(specreg.SpecregError) as err:
        specreg.normalize(envelope("unit-plugin-unknown"), vllm="0.33")
    assert "my_plugin.algos:normalize" in str(err.value) and "specreg.register_finding('myplugin/name'" in str(err.value)
    with pytest.raises(specreg.SpecregError) as err:
        specreg.normalize(envelope("unit-plugin-assigns"), vllm="0.33")
    assert "my_plugin.algos:normalize" in str(err.value) and "is read-only: set it with plan.copy" in str(err.value)


def test_specreg_debug_shows_the_plugins_traceback(tmp_path):
    """Through the CLI: one line naming the plugin, and with SPECREG_DEBUG=1 the traceback of what it raised."""
    import json
    import os

    pkg = tmp_path / "my_plugin"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        "import specreg\n"
        "@specreg.register_speculator('unit-plugin-boom', method='eagle3')\n"
        "def normalize(cfg, ctx):\n"
        "    raise ZeroDivisionError('the plugin divided by zero')\n")
    config = tmp_path / "config.json"
    config.write_text(json.dumps(envelope("unit-plugin-boom")))
    code = "import my_plugin, sys; from specreg.cli.main import main; sys.exit(main(['show', sys.argv[1]]))"
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    plain = subprocess.run([sys.executable, "-c", code, str(config)], capture_output=True, text=True, env=env)
    assert plain.returncode == 2 and "Traceback" not in plain.stderr
    assert "the algorithm plugin my_plugin:normalize" in plain.stderr and "ZeroDivisionError" in plain.stderr
    debug = subprocess.run([sys.executable, "-c", code, str(config)], capture_output=True, text=True,
                           env={**env, "SPECREG_DEBUG": "1"})
    assert debug.returncode == 2 and "Traceback" in debug.stderr and 'my_plugin/__init__.py", line 4' in debug.stderr


@pytest.mark.parametrize(("returned", "words"), [
    (None, "it returned NoneType None, not a specreg.Plan"),
    ({"num_speculative_tokens": 3}, "it returned dict {'num_speculative_tokens': 3}, not a specreg.Plan"),
    ("plan", "it returned str 'plan', not a specreg.Plan"),
])
def test_a_function_that_returns_no_plan_is_an_error_naming_the_plugin(plugin, returned, words):
    plugin("unit-plugin-returns", lambda cfg, ctx: returned)
    with pytest.raises(specreg.SpecregError) as err:
        specreg.normalize(envelope("unit-plugin-returns"), vllm="0.33")
    assert str(err.value) == (f"the algorithm plugin my_plugin.algos:normalize for 'unit-plugin-returns' failed on this "
                              f"config (TypeError: {words}); report it to that plugin's authors")


@pytest.mark.parametrize(("raised", "words"), [
    (SystemExit(0), "SystemExit(0)"), (SystemExit(), "SystemExit()"), (KeyboardInterrupt(), "KeyboardInterrupt()")])
def test_a_function_that_would_end_the_process_is_an_error_naming_the_plugin(plugin, raised, words):
    def body(cfg, ctx):
        raise raised

    plugin("unit-plugin-exits", body)
    with pytest.raises(specreg.SpecregError) as err:
        specreg.normalize(envelope("unit-plugin-exits"), vllm="0.33")
    assert f"the algorithm plugin my_plugin.algos:normalize for 'unit-plugin-exits' failed on this config (RuntimeError: " \
           f"it raised {words}, which would have ended the process)" in str(err.value)


@pytest.mark.parametrize("name", ["", "Medusa", "medusa x", "medusa\n", "medusa\x1b[2J", "2medusa", "medusa/x", "médusa"])
def test_an_algorithm_name_outside_the_pattern_is_refused(plugin, name):
    with pytest.raises(specreg.RegistryError, match="a name is the speculators_model_type string"):
        plugin(name, lambda cfg, ctx: None)
    assert name not in algorithms._registered
