"""One battery of checks over every algorithm the registry knows (built-in or plugin), parametrized by
the registry itself: adding an algorithm adds its cases, and a new algorithm is tested by being added.

Each algorithm's minimal valid config is the smallest fixture of tests/data/speculators whose
speculators_model_type is its name (an algorithm without one fails here: add one)."""

import copy
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import specreg
from conftest import SPECULATORS_DIRS, fixture_config, serving_release
from specreg.normalization import algorithms, findings
from specreg.normalization.capabilities import NEWEST_KNOWN
from test_materialize import plan_of
from test_registry import PLUGIN, _plugin_dist, _run
from test_vllm_plugin import VllmMapping

NAMES = [a.name for a in algorithms.algorithms()]
VLLM = str(NEWEST_KNOWN)


def vllm_for(name: str) -> str:
    """Where the algorithm contract holds: the newest known release that serves `name`."""
    return serving_release(name) or VLLM


def rows(listing: str) -> list[list[str]]:
    """`specreg algorithms`' rows, split into cells (its columns are as wide as the longest name)."""
    return [line.split() for line in listing.splitlines()]


def minimal_config(name: str) -> dict:
    found = sorted(
        (p.stat().st_size, p)
        for folder in SPECULATORS_DIRS
        for p in folder.glob("*.json")
        if json.loads(p.read_text()).get("speculators_model_type") == name
    )
    assert found, f"no fixture of type {name!r}: add tests/data/speculators/{name}.json, its minimal valid config"
    return json.loads(found[0][1].read_text())


def required_fields(algo) -> list[str]:
    """The docstring rows required unconditionally ("required", "required (never guessed)")."""
    return [r.name for r in algo.fields() if r.requirement.split(" (")[0] == "required"]


def without(cfg: dict, dotted: str) -> dict:
    cfg = copy.deepcopy(cfg)
    *parents, last = dotted.split(".")
    node = cfg
    for key in parents:
        node = node[key]
    del node[last]
    return cfg


@pytest.mark.parametrize("name", NAMES)
def test_the_minimal_config_normalizes(name):
    algo = algorithms.get(name)
    spec = specreg.normalize(minimal_config(name), vllm=vllm_for(name))
    assert spec.algorithm == name and spec.method == algo.method
    if algo.unservable:
        assert [(f.code, f.message) for f in spec.errors] == [("unservable-algorithm", algo.unservable)]
    else:
        assert not spec.errors, [f.message for f in spec.errors]


@pytest.mark.parametrize("name", NAMES)
def test_a_release_that_removed_the_algorithm_refuses_it_in_its_own_words(name):
    from packaging.version import Version

    from specreg import facts

    algo = algorithms.get(name)
    removed = [
        r
        for r in facts.known()
        if algo.method and not algo.served_by(Version(r)) and algo.last_served_before(Version(r))
    ]
    for release in removed:
        spec = specreg.normalize(minimal_config(name), vllm=release)
        (error,) = [f for f in spec.errors if f.code == "vllm-removed-algorithm"]
        words = facts.refusal(release, name)
        last = algo.last_served_before(Version(release))
        assert error.message == (
            f"vLLM {release} no longer serves {name}"
            + (f': its speculators path says "{words}"' if words else "")
            + f"; the last release that serves it is vLLM {last}"
        )
        assert not specreg.normalize(minimal_config(name), vllm=last).errors


def test_the_newest_release_removed_p_eagle_and_says_why_in_its_own_words():
    """The case the test above holds, named: vLLM's own refusal, read from its wheel by refresh."""
    from specreg import facts

    newest = facts.known()[-1]
    if facts.holds("algorithm_peagle", newest):
        pytest.skip("the newest release serves P-EAGLE again")
    spec = specreg.normalize(minimal_config("peagle"), vllm=newest)
    assert [f.code for f in spec.errors] == ["vllm-removed-algorithm"]
    assert "P-EAGLE (parallel drafting EAGLE-3) is not supported." in spec.errors[0].message


@pytest.mark.parametrize("name", NAMES)
def test_the_docstring_table_lists_exactly_the_fields_read(name):
    from specreg.normalization.core import _read_envelope
    from specreg.normalization.fields import Fields
    from specreg.normalization.plan import Context

    algo = algorithms.get(name)
    cfg = minimal_config(name)
    fields = Fields(cfg)
    algo.function(
        fields, Context(vllm=NEWEST_KNOWN, source=None, envelope=_read_envelope(Fields(cfg), NEWEST_KNOWN)[0])
    )
    assert fields.reads == {row.name for row in algo.fields()}


@pytest.mark.parametrize("name", NAMES)
def test_every_required_field_missing_is_a_config_error_at_its_path(name):
    cfg = minimal_config(name)
    for field in required_fields(algorithms.get(name)):
        with pytest.raises(specreg.ConfigError) as err:
            specreg.normalize(without(cfg, field), vllm=VLLM)
        assert f"$.{field}" in [p.path for p in err.value.problems], (field, err.value.details())


@pytest.mark.parametrize("name", [n for n in NAMES if not algorithms.get(n).unservable])
def test_a_materialized_directory_reads_back_as_the_same_plan(tmp_path, name):
    spec = specreg.normalize(minimal_config(name), vllm=vllm_for(name), verifier="Qwen/Qwen3-8B")
    back = specreg.load(spec.materialize(tmp_path / "draft", weights="none").directory)
    assert back.format == "materialized"
    assert plan_of(back) == plan_of(spec)
    assert not back.errors, [f.message for f in back.errors]


@pytest.mark.parametrize("name", NAMES)
def test_the_vllm_plugin_plans_it_whether_or_not_vllms_table_has_its_type(name):
    """The plugin installed into a vLLM-shaped mapping (test_vllm_plugin.VllmMapping) whose
    table lacks the type, and one whose table has it: an algorithm with a vLLM method is planned
    (specreg's draft config and speculative config), a refused one is left to vLLM."""
    from specreg.vllm import plugin

    algo = algorithms.get(name)
    cfg = minimal_config(name)
    for types in ((), (name,)):
        m = VllmMapping(types=types)
        plugin.install(m.algos, m.config_class, vllm_for(name))
        try:
            if algo.method is None:
                assert m.speculative_config(cfg)["method"] == name  # vLLM's own result
                if types:
                    m.draft_config(cfg)
                    assert m.vllms == [name]
                continue
            spec = specreg.normalize(cfg, vllm=vllm_for(name))
            assert m.draft_config(cfg) == spec.draft_config_dict()
            assert m.speculative_config(cfg) == spec.speculative_config_dict()
            assert m.vllms == []
        finally:
            plugin.uninstall(m.algos, m.config_class)


NEWDRAFT = '''
    """A new draft type: served as DFlash, with its own name."""

    from specreg.normalization.algorithms import register_speculator
    from specreg.normalization.dflash_family import normalize
    from specreg.algos.dflash import DFLASH, dflash


    @register_speculator("newdraft", method="dflash", vllm_min="0.20")
    def newdraft(cfg, ctx):
        return normalize(cfg, ctx, DFLASH)


    newdraft.__doc__ = dflash.__doc__
'''


def newdraft_config() -> dict:
    cfg = minimal_config("dflash")
    cfg["speculators_model_type"] = cfg["speculators_config"]["algorithm"] = "newdraft"
    return cfg


def test_a_new_algos_module_is_planned_by_the_vllm_plugin_with_no_other_edit(tmp_path, monkeypatch):
    """A copy of algos/ plus one file, `newdraft.py`: the plugin, installed into vLLM's mapping as
    vLLM's table stands (without "newdraft"), plans it."""
    import shutil

    import specreg.algos
    from specreg.vllm import plugin

    pkg = tmp_path / "contractalgos"
    shutil.copytree(Path(specreg.algos.__file__).parent, pkg, ignore=shutil.ignore_patterns("__pycache__"))
    (pkg / "newdraft.py").write_text(textwrap.dedent(NEWDRAFT))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(algorithms, "BUILTIN_PACKAGE", "contractalgos")
    monkeypatch.setattr(algorithms, "_builtin", None)
    monkeypatch.setattr(algorithms, "_registered", {})
    cfg = newdraft_config()
    spec = specreg.normalize(cfg, vllm=VLLM)
    assert spec.method == "dflash" and not spec.errors
    m = VllmMapping()
    plugin.install(m.algos, m.config_class, VLLM)
    try:
        assert m.draft_config(cfg) == spec.draft_config_dict()
        assert m.speculative_config(cfg) == spec.speculative_config_dict()
    finally:
        plugin.uninstall(m.algos, m.config_class)
        for module in [mod for mod in sys.modules if mod.split(".")[0] == "contractalgos"]:
            del sys.modules[module]


def test_an_entry_point_algorithm_is_planned_by_the_vllm_plugin_with_no_other_edit(tmp_path):
    """The same algorithm shipped by another package through the specreg.algorithms entry point."""
    from test_registry import _plugin_dist

    site = _plugin_dist(tmp_path, "newdraft = my_newdraft\n", {"my_newdraft": NEWDRAFT})
    tests = Path(__file__).resolve().parent
    code = textwrap.dedent(f"""
        import json, sys
        sys.path[:0] = [{str(site)!r}, {str(tests)!r}]
        import specreg
        from specreg.vllm import plugin
        from test_vllm_plugin import VllmMapping
        cfg = json.loads(sys.argv[1])
        spec = specreg.normalize(cfg, vllm={VLLM!r})
        m = VllmMapping()
        plugin.install(m.algos, m.config_class, {VLLM!r})
        print(m.draft_config(cfg) == spec.draft_config_dict(), m.speculative_config(cfg) == spec.speculative_config_dict(),
              spec.method, m.vllms)
    """)
    out = subprocess.run(
        [sys.executable, "-c", code, json.dumps(newdraft_config())],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["True True dflash []"]


# --------------------------------------------------------------------------------------------------
# What an algorithm plugin (a module of another package) is written with: the names `specreg`
# exports, its own namespaced finding codes, and clear errors that name the plugin when it misuses
# the API (issue 27).


def envelope(algorithm: str) -> dict:
    return {
        "speculators_model_type": algorithm,
        "architectures": ["X"],
        "speculators_config": {
            "algorithm": algorithm,
            "verifier": {"name_or_path": "org/v"},
            "proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": 3}],
            "default_proposal_method": "greedy",
        },
        "transformer_layer_config": {
            "model_type": "llama",
            "hidden_size": 64,
            "num_attention_heads": 4,
            "num_key_value_heads": 4,
            "num_hidden_layers": 1,
            "vocab_size": 128,
        },
    }


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
    for name in (
        "Plan",
        "Context",
        "Fields",
        "Kind",
        "POS_INT",
        "NONNEG_INT",
        "COUNT",
        "BOOL",
        "STR",
        "NUMBER",
        "LAYER_IDS",
        "STR_LIST",
        "check_layer_ids",
        "register_speculator",
        "register_finding",
    ):
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


@pytest.mark.parametrize(
    "code, words", [("head-too-wide", "namespaced"), ("MyPlugin/x", "namespaced"), ("my-plugin/x", None)]
)
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
    assert "my_plugin.algos:normalize" in str(err.value) and "specreg.register_finding('myplugin/name'" in str(
        err.value
    )
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
        "    raise ZeroDivisionError('the plugin divided by zero')\n"
    )
    config = tmp_path / "config.json"
    config.write_text(json.dumps(envelope("unit-plugin-boom")))
    code = "import my_plugin, sys; from specreg.cli.main import main; sys.exit(main(['show', sys.argv[1]]))"
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    plain = subprocess.run([sys.executable, "-c", code, str(config)], capture_output=True, text=True, env=env)
    assert plain.returncode == 2 and "Traceback" not in plain.stderr
    assert "the algorithm plugin my_plugin:normalize" in plain.stderr and "ZeroDivisionError" in plain.stderr
    debug = subprocess.run(
        [sys.executable, "-c", code, str(config)], capture_output=True, text=True, env={**env, "SPECREG_DEBUG": "1"}
    )
    assert debug.returncode == 2 and "Traceback" in debug.stderr and 'my_plugin/__init__.py", line 4' in debug.stderr


@pytest.mark.parametrize(
    ("returned", "words"),
    [
        (None, "it returned NoneType None, not a specreg.Plan"),
        ({"num_speculative_tokens": 3}, "it returned dict {'num_speculative_tokens': 3}, not a specreg.Plan"),
        ("plan", "it returned str 'plan', not a specreg.Plan"),
    ],
)
def test_a_function_that_returns_no_plan_is_an_error_naming_the_plugin(plugin, returned, words):
    plugin("unit-plugin-returns", lambda cfg, ctx: returned)
    with pytest.raises(specreg.SpecregError) as err:
        specreg.normalize(envelope("unit-plugin-returns"), vllm="0.33")
    assert str(err.value) == (
        f"the algorithm plugin my_plugin.algos:normalize for 'unit-plugin-returns' failed on this "
        f"config (TypeError: {words}); report it to that plugin's authors"
    )


@pytest.mark.parametrize(
    ("raised", "words"),
    [(SystemExit(0), "SystemExit(0)"), (SystemExit(), "SystemExit()"), (KeyboardInterrupt(), "KeyboardInterrupt()")],
)
def test_a_function_that_would_end_the_process_is_an_error_naming_the_plugin(plugin, raised, words):
    def body(cfg, ctx):
        raise raised

    plugin("unit-plugin-exits", body)
    with pytest.raises(specreg.SpecregError) as err:
        specreg.normalize(envelope("unit-plugin-exits"), vllm="0.33")
    assert (
        f"the algorithm plugin my_plugin.algos:normalize for 'unit-plugin-exits' failed on this config (RuntimeError: "
        f"it raised {words}, which would have ended the process)" in str(err.value)
    )


@pytest.mark.parametrize(
    "name", ["", "Medusa", "medusa x", "medusa\n", "medusa\x1b[2J", "2medusa", "medusa/x", "médusa"]
)
def test_an_algorithm_name_outside_the_pattern_is_refused(plugin, name):
    with pytest.raises(specreg.RegistryError, match="a name is the speculators_model_type string"):
        plugin(name, lambda cfg, ctx: None)
    assert name not in algorithms._registered


# --------------------------------------------------------------------------------------------------
# Algorithm plugins are guests (issue 35): an entry point of `specreg.algorithms` that exits, is
# interrupted, fails half-way, or replaces an algorithm registered before it is one line naming its
# package and is rolled back; the rest of specreg goes on. Each case runs in a fresh interpreter with
# the plugin's dist-info on sys.path, as pip installs one.

CLI = "import sys; from specreg.cli.main import main; sys.exit(main(sys.argv[1:]))"


def line(entry: str, value: str, error: str) -> str:
    return f"specreg: the algorithm plugin {entry} = {value} (package specreg-test-plugin 1.0) failed: {error}; it is skipped"


def cli(tmp_path, site, *argv):
    import subprocess
    import sys

    script = f"import sys; sys.path[:0] = [{str(site)!r}]\n" + CLI
    return subprocess.run(
        [sys.executable, "-c", script, *argv], capture_output=True, text=True, cwd=tmp_path, timeout=60
    )


def medusa_config(tmp_path):
    cfg = fixture_config("eagle3_generated")
    cfg["speculators_model_type"] = "medusa"
    (tmp_path / "medusa").mkdir()
    (tmp_path / "medusa" / "config.json").write_text(json.dumps(cfg))
    return str(tmp_path / "medusa")


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ("import sys; sys.exit(0)\n", "SystemExit: it called sys.exit(0)"),
        ("raise SystemExit\n", "SystemExit: it called sys.exit()"),
        ("raise KeyboardInterrupt\n", "KeyboardInterrupt"),
    ],
)
def test_a_plugin_that_exits_or_is_interrupted_at_import_is_one_line_and_the_rest_goes_on(tmp_path, body, error):
    site = _plugin_dist(tmp_path, "bye = my_bye\nmedusa = my_medusa\n", {"my_bye": body, "my_medusa": PLUGIN})
    listed = cli(tmp_path, site, "algorithms")
    assert listed.returncode == 0, listed.stderr
    assert listed.stderr.splitlines() == [line("bye", "my_bye", error)]
    assert ["medusa", "medusa", "0.10", "my_medusa"] in rows(listed.stdout)
    shown = cli(tmp_path, site, "show", medusa_config(tmp_path))
    assert shown.stderr.splitlines() == [line("bye", "my_bye", error)]
    assert shown.returncode == 0 and "(medusa, speculators" in shown.stdout


HALFWAY = PLUGIN.replace('"medusa"', '"halfway"') + "\nraise ImportError('needs torch_npu')\n"


def test_a_plugin_that_registers_then_fails_at_import_is_unregistered(tmp_path):
    site = _plugin_dist(tmp_path, "halfway = my_halfway\n", {"my_halfway": HALFWAY})
    out = _run(
        """
        import specreg
        from specreg.normalization import algorithms
        print("halfway" in {a.name for a in specreg.algorithms()})
        try:
            algorithms.get("halfway")
        except specreg.UnknownAlgorithmError as exc:
            print(type(exc).__name__)
        print([b.entry_point for b in algorithms.broken_plugins()])
    """,
        tmp_path,
        site,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["False", "UnknownAlgorithmError", "['halfway']"]
    assert out.stderr.splitlines() == [line("halfway", "my_halfway", "ImportError: needs torch_npu")]


def test_a_failed_plugin_that_imported_a_builtin_leaves_the_builtin_served(tmp_path):
    body = "import specreg.algos.dflash\nraise ImportError('needs torch_npu')\n"
    site = _plugin_dist(tmp_path, "leans = my_leans\n", {"my_leans": body})
    out = _run(
        f"""
        import json, specreg
        from specreg.normalization import algorithms
        algorithms.load_plugins()
        print(specreg.normalize(json.loads({json.dumps(json.dumps(fixture_config("dflash")))}), vllm="0.33").method)
    """,
        tmp_path,
        site,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["dflash"]


# three ways a plugin's import can take the built-in dflash over
REPLACING = {
    "the registry's table": (
        "import attrs\nfrom specreg.normalization import algorithms\n"
        "algorithms._registered['dflash'] = attrs.evolve(algorithms.get('dflash'), method='eagle3')\n",
        "it replaced the built-in algorithm 'dflash' of specreg.algos.dflash:dflash with specreg.algos.dflash:dflash",
    ),
    "a borrowed module name": (
        "import specreg\n"
        "def dflash(cfg, ctx):\n    return None\n"
        "dflash.__module__ = 'specreg.algos.dflash'\n"
        "specreg.register_speculator('dflash', method='eagle3')(dflash)\n",
        "RegistryError: speculator algorithm 'dflash' is registered twice: first by the "
        "built-in specreg.algos.dflash, again by specreg.algos.dflash:dflash",
    ),
    "its module reloaded": (
        "import importlib, specreg.algos.dflash\nimportlib.reload(specreg.algos.dflash)\n",
        "it replaced the built-in algorithm 'dflash' of specreg.algos.dflash:dflash with specreg.algos.dflash:dflash",
    ),
}


@pytest.mark.parametrize("how", sorted(REPLACING))
def test_a_plugin_replacing_a_builtin_is_reported_and_the_builtin_kept(tmp_path, how):
    body, error = REPLACING[how]
    site = _plugin_dist(tmp_path, "taker = my_taker\n", {"my_taker": body})
    out = _run(
        f"""
        import json, specreg
        print({{a.name: a.method for a in specreg.algorithms()}}["dflash"])
        spec = specreg.normalize(json.loads({json.dumps(json.dumps(fixture_config("dflash")))}), vllm="0.33")
        print(spec.method, [f.code for f in spec.errors])
    """,
        tmp_path,
        site,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["dflash", "dflash []"]
    assert out.stderr.splitlines() == [line("taker", "my_taker", error)]


def test_a_plugin_replacing_another_plugins_algorithm_is_reported(tmp_path):
    body = (
        "import attrs\nfrom specreg.normalization import algorithms\n"
        "algorithms._registered['medusa'] = attrs.evolve(algorithms.get('medusa'), method='eagle3')\n"
    )
    site = _plugin_dist(tmp_path, "medusa = my_medusa\ntaker = my_taker\n", {"my_medusa": PLUGIN, "my_taker": body})
    out = _run("from specreg.normalization import algorithms; print(algorithms.get('medusa').method)", tmp_path, site)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["medusa"]
    assert out.stderr.splitlines() == [
        line("taker", "my_taker", "it replaced the algorithm 'medusa' of my_medusa:medusa with my_medusa:medusa")
    ]


def test_an_algorithm_name_with_terminal_controls_is_refused_and_printed_escaped(tmp_path):
    site = _plugin_dist(tmp_path, "evil = my_evil\n", {"my_evil": PLUGIN.replace('"medusa"', '"medusa\\x1b[2J"')})
    out = cli(tmp_path, site, "algorithms")
    assert out.returncode == 0, out.stderr
    assert "\x1b" not in out.stdout + out.stderr
    assert out.stderr.splitlines() == [
        line(
            "evil",
            "my_evil",
            "RegistryError: algorithm name 'medusa\\x1b[2J': a name is the "
            "speculators_model_type string, lower-case letters, digits, '_' and '-', "
            "starting with a letter",
        )
    ]


def test_a_plugins_module_name_is_printed_escaped(tmp_path):
    body = PLUGIN + "\nmedusa.__module__ = 'my\\x1b[2Jmedusa'\n"
    body = body.replace('@register_speculator("medusa", method="medusa", vllm_min="0.10")\n', "")
    body += 'register_speculator("medusa", method="medusa", vllm_min="0.10")(medusa)\n'
    site = _plugin_dist(tmp_path, "medusa = my_medusa\n", {"my_medusa": body})
    out = cli(tmp_path, site, "algorithms")
    assert out.returncode == 0 and out.stderr == "", out.stderr
    assert "\x1b" not in out.stdout
    assert ["medusa", "medusa", "0.10", "my\\x1b[2Jmedusa"] in rows(out.stdout)


def test_a_slow_plugin_slows_no_builtin(tmp_path):
    """While a plugin's import is still running in one thread, a built-in draft is normalized in another:
    the registry is not held for a guest's import (and a built-in never loads the plugins at all)."""
    gate = "import threading\nENTERED, RELEASE = threading.Event(), threading.Event()\n"
    slow = "import gate\ngate.ENTERED.set()\ngate.RELEASE.wait(60)\n"
    site = _plugin_dist(tmp_path, "slow = my_slow\n", {"my_slow": slow, "gate": gate})
    out = _run(
        f"""
        import json, sys, threading, gate, specreg
        loading = threading.Thread(target=specreg.algorithms)
        loading.start()
        assert gate.ENTERED.wait(30)
        done = []
        other = threading.Thread(target=lambda: done.append(
            specreg.normalize(json.loads({json.dumps(json.dumps(fixture_config("dflash")))}), vllm="0.33").method))
        other.start()
        other.join(30)
        print(done, "my_slow" in sys.modules)
        gate.RELEASE.set()
        loading.join(30)
        other.join(30)
    """,
        tmp_path,
        site,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["['dflash'] True"]


def test_a_builtin_draft_never_imports_a_plugin(tmp_path):
    site = _plugin_dist(tmp_path, "bye = my_bye\n", {"my_bye": "import sys; sys.exit(7)\n"})
    out = _run(
        f"""
        import json, sys, specreg
        spec = specreg.normalize(json.loads({json.dumps(json.dumps(fixture_config("dflash")))}), vllm="0.33")
        print(spec.method, "my_bye" in sys.modules)
    """,
        tmp_path,
        site,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["dflash False"]
