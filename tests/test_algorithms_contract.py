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
from conftest import DATA
from specreg.normalization import algorithms
from specreg.normalization.capabilities import NEWEST_KNOWN
from test_materialize import plan_of
from test_vllm_plugin_gates import VllmMapping

NAMES = [a.name for a in algorithms.algorithms()]
VLLM = str(NEWEST_KNOWN)


def minimal_config(name: str) -> dict:
    found = sorted((p.stat().st_size, p) for p in (DATA / "speculators").glob("*.json")
                   if json.loads(p.read_text()).get("speculators_model_type") == name)
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
    spec = specreg.normalize(minimal_config(name), vllm=VLLM)
    assert spec.algorithm == name and spec.method == algo.method
    if algo.unservable:
        assert [(f.code, f.message) for f in spec.errors] == [("unservable-algorithm", algo.unservable)]
    else:
        assert not spec.errors, [f.message for f in spec.errors]


@pytest.mark.parametrize("name", NAMES)
def test_the_docstring_table_lists_exactly_the_fields_read(name):
    from specreg.normalization.core import _read_envelope
    from specreg.normalization.fields import Fields
    from specreg.normalization.plan import Context

    algo = algorithms.get(name)
    cfg = minimal_config(name)
    fields = Fields(cfg)
    algo.function(fields, Context(vllm=NEWEST_KNOWN, source=None, envelope=_read_envelope(Fields(cfg), NEWEST_KNOWN)[0]))
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
    spec = specreg.normalize(minimal_config(name), vllm=VLLM, verifier="Qwen/Qwen3-8B")
    back = specreg.load(spec.materialize(tmp_path / "draft", weights="none").directory)
    assert back.format == "materialized"
    assert plan_of(back) == plan_of(spec)
    assert not back.errors, [f.message for f in back.errors]


@pytest.mark.parametrize("name", NAMES)
def test_the_vllm_plugin_plans_it_whether_or_not_vllms_table_has_its_type(name):
    """The plugin installed into a vLLM-shaped mapping (test_vllm_plugin_gates.VllmMapping) whose
    table lacks the type, and one whose table has it: an algorithm with a vLLM method is planned
    (specreg's draft config and speculative config), a refused one is left to vLLM."""
    from specreg.vllm import plugin

    algo = algorithms.get(name)
    cfg = minimal_config(name)
    for types in ((), (name,)):
        m = VllmMapping(types=types)
        plugin.install(m.algos, m.config_class, VLLM)
        try:
            if algo.method is None:
                assert m.speculative_config(cfg)["method"] == name  # vLLM's own result
                if types:
                    m.draft_config(cfg)
                    assert m.vllms == [name]
                continue
            spec = specreg.normalize(cfg, vllm=VLLM)
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
        from test_vllm_plugin_gates import VllmMapping
        cfg = json.loads(sys.argv[1])
        spec = specreg.normalize(cfg, vllm={VLLM!r})
        m = VllmMapping()
        plugin.install(m.algos, m.config_class, {VLLM!r})
        print(m.draft_config(cfg) == spec.draft_config_dict(), m.speculative_config(cfg) == spec.speculative_config_dict(),
              spec.method, m.vllms)
    """)
    out = subprocess.run([sys.executable, "-c", code, json.dumps(newdraft_config())], capture_output=True, text=True,
                         cwd=tmp_path, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["True True dflash []"]
