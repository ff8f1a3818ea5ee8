"""The algorithm registry: built-ins, collisions, plugins, and each module's docstring table."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import specreg
from specreg.normalization import algorithms
from conftest import fixture_config

FIXTURE_OF = {
    "eagle3": ["eagle3_generated", "eagle3_converted", "eagle3_v040_generated"],
    "peagle": ["peagle"],
    "dflash": ["dflash"],
    "dflash2": ["dflash2"],
    "dspark": ["dspark_generated"],
    "mtp": ["mtp"],
    "xpress": ["xpress"],
    "eagle": ["eagle_legacy_v040"],
    "independent": ["independent_v040"],
    "mlp": ["mlp_v040"],
}


def test_every_builtin_is_registered_by_its_module():
    algos = {a.name: a for a in specreg.algorithms()}
    assert set(algorithms.builtin()) <= set(algos)
    for name, module in algorithms.builtin().items():
        assert algos[name].module == module


def test_builtin_methods_and_first_vllm_versions():
    algos = {a.name: a for a in specreg.algorithms()}
    served = {n: (a.method, str(a.vllm_min)) for n, a in algos.items() if a.method}
    assert served == {
        "eagle3": ("eagle3", "0.10.1"),
        "peagle": ("eagle3", "0.22"),
        "dflash": ("dflash", "0.20"),
        "dflash2": ("dflash", "0.29"),
        "dspark": ("dspark", "0.25"),
    }
    assert {n for n, a in algos.items() if a.unservable} == {"mtp", "xpress", "eagle", "independent", "mlp"}


def test_registering_a_builtin_name_again_names_both_origins():
    with pytest.raises(specreg.RegistryError) as info:

        @specreg.register_speculator("dflash", method="dflash")
        def my_dflash(cfg, ctx):
            return None

    message = str(info.value)
    assert "specreg.algos.dflash" in message
    assert "test_registry:test_registering_a_builtin_name_again_names_both_origins.<locals>.my_dflash" in message


def test_registering_a_plugin_name_twice_names_both_origins():
    @specreg.register_speculator("unit-test-algo", method="eagle3")
    def first(cfg, ctx):
        return None

    with pytest.raises(specreg.RegistryError) as info:

        @specreg.register_speculator("unit-test-algo", method="eagle3")
        def second(cfg, ctx):
            return None

    assert ".first" in str(info.value) and ".second" in str(info.value)
    algorithms._registered.pop("unit-test-algo")


def test_a_registration_needs_a_method_or_a_reason():
    with pytest.raises(specreg.RegistryError, match="exactly one of method= or unservable="):
        specreg.register_speculator("x")


@pytest.mark.parametrize("name", sorted(algorithms.builtin()))
def test_docstring_table_lists_exactly_the_fields_the_function_reads(name):
    from specreg.normalization.fields import Fields
    from specreg.normalization.core import _read_envelope
    from specreg.normalization.plan import Context
    from specreg.normalization.capabilities import NEWEST_KNOWN

    algo = algorithms.get(name)
    documented = {row.name for row in algo.fields()}
    read: set[str] = set()
    for fixture in FIXTURE_OF[name]:
        cfg = fixture_config(fixture)
        envelope, _ = _read_envelope(Fields(cfg), NEWEST_KNOWN)
        fields = Fields(cfg)
        algo.function(fields, Context(vllm=NEWEST_KNOWN, source=None, envelope=envelope))
        read |= fields.reads
    assert read == documented


def test_an_unservable_algorithm_documents_an_empty_table():
    assert algorithms.get("mtp").fields() == []


def _run(code, tmp_path, extra_path=None):
    env_path = [str(extra_path)] if extra_path else []
    script = "import sys; sys.path[:0] = %r\n" % env_path + textwrap.dedent(code)
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, timeout=60)


def _plugin_dist(tmp_path, entry_points: str, modules: dict):
    site = tmp_path / "site"
    dist = site / "specreg_test_plugin-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: specreg-test-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[specreg.algorithms]\n" + entry_points)
    for name, body in modules.items():
        (site / f"{name}.py").write_text(textwrap.dedent(body))
    return site


PLUGIN = """
from specreg import register_speculator
from specreg.normalization.plan import Plan

@register_speculator("medusa", method="medusa", vllm_min="0.10")
def medusa(cfg, ctx):
    '''Medusa heads.

    | field | type | required / default | why |
    |---|---|---|---|
    '''
    plan = Plan()
    plan.copy("num_speculative_tokens", ctx.envelope.num_speculative_tokens, ctx.envelope.tokens_path)
    return plan
"""


def test_a_plugin_algorithm_is_found_through_its_entry_point(tmp_path):
    site = _plugin_dist(tmp_path, "medusa = my_medusa\n", {"my_medusa": PLUGIN})
    cfg = fixture_config("eagle3_generated")
    cfg["speculators_model_type"] = "medusa"
    result = _run(
        f"""
        import json, specreg
        spec = specreg.normalize(json.loads({json.dumps(json.dumps(cfg))}))
        print(spec.method, spec.num_speculative_tokens)
        print(sorted(a.name for a in specreg.algorithms() if a.module == "my_medusa"))
        """,
        tmp_path,
        site,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["medusa 3", "['medusa']"]


def test_a_broken_plugin_is_reported_and_skipped(tmp_path):
    site = _plugin_dist(
        tmp_path,
        "broken = my_broken\nclash = my_clash\nmedusa = my_medusa\n",
        {
            "my_broken": "raise ImportError('needs torch_npu')\n",
            "my_clash": PLUGIN.replace('"medusa"', '"dflash"').replace("def medusa", "def clash"),
            "my_medusa": PLUGIN,
        },
    )
    result = _run(
        """
        import specreg
        from specreg.normalization.algorithms import broken_plugins
        names = sorted(a.name for a in specreg.algorithms())
        print("medusa" in names, "dflash" in names)
        for b in broken_plugins():
            print(b.entry_point, "|", b.error)
        """,
        tmp_path,
        site,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "True True"
    assert lines[1] == "broken | ImportError: needs torch_npu"
    assert lines[2].startswith("clash | RegistryError: speculator algorithm 'dflash' is registered twice")
    assert "specreg.algos.dflash" in lines[2] and "my_clash:clash" in lines[2]
    assert result.stderr.splitlines()[0] == (
        "specreg: the algorithm plugin broken = my_broken (package "
        "specreg-test-plugin 1.0) failed: ImportError: needs torch_npu; it is skipped"
    )


def test_the_cli_lists_algorithms_and_reports_broken_plugins(tmp_path):
    site = _plugin_dist(tmp_path, "broken = my_broken\n", {"my_broken": "raise RuntimeError('boom')\n"})
    result = _run("import sys; from specreg.cli.main import main; sys.exit(main(['algorithms']))", tmp_path, site)
    assert result.returncode == 0
    assert "dflash2      dflash       0.29        specreg.algos.dflash2" in result.stdout
    assert result.stderr.splitlines() == [
        "specreg: the algorithm plugin broken = my_broken (package "
        "specreg-test-plugin 1.0) failed: RuntimeError: boom; it is skipped"
    ]


def test_a_new_builtin_algorithm_is_one_file_in_the_algos_package(tmp_path, monkeypatch):
    """Built-ins are the files of the algos package: a package with one more file (here a copy of
    algos/ plus `newdraft.py`, in a temporary directory) has one more algorithm, found without
    importing it, served through specreg.normalize; no table to edit anywhere."""
    import shutil

    import specreg.algos
    from conftest import fixture_config

    pkg = tmp_path / "tmpalgos"
    shutil.copytree(Path(specreg.algos.__file__).parent, pkg, ignore=shutil.ignore_patterns("__pycache__"))
    (pkg / "newdraft.py").write_text(
        textwrap.dedent('''
        """A new draft type: served as DFlash, with its own name."""

        from specreg.normalization.algorithms import register_speculator
        from specreg.normalization.dflash_family import normalize
        from tmpalgos.dflash import DFLASH


        @register_speculator("newdraft", method="dflash", vllm_min="0.20")
        def newdraft(cfg, ctx):
            """DFlash's fields (see algos/dflash.py).

            | field | type | required / default | why |
            |---|---|---|---|
            """
            return normalize(cfg, ctx, DFLASH)
    ''')
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(algorithms, "BUILTIN_PACKAGE", "tmpalgos")
    monkeypatch.setattr(algorithms, "_builtin", None)
    monkeypatch.setattr(algorithms, "_registered", {})
    assert algorithms.builtin()["newdraft"] == "tmpalgos.newdraft"
    assert set(algorithms.builtin()) == set(FIXTURE_OF) | {"newdraft"}
    assert "tmpalgos.newdraft" not in sys.modules  # listed, not imported
    cfg = fixture_config("dflash")
    cfg["speculators_model_type"] = "newdraft"
    spec = specreg.normalize(cfg, vllm="0.33")
    assert spec.algorithm == "newdraft" and spec.method == "dflash" and not spec.errors
    assert algorithms.get("newdraft").module == "tmpalgos.newdraft"
    assert "newdraft" in {a.name for a in algorithms.algorithms()}


def test_the_example_plugins_docstring_table_lists_exactly_the_fields_it_reads(tmp_path):
    """examples/specreg-example-plugin is held to the rule it teaches (installed and served: test_packaging,
    and on the engine: tests/engine_tier/test_example_plugin.py)."""
    root = Path(__file__).resolve().parent.parent
    code = f"""
        import json, sys
        sys.path.insert(0, {str(root / "examples" / "specreg-example-plugin")!r}); sys.path.insert(0, {str(root / "tests")!r})
        import specreg_example_plugin.example_eagle3
        from specreg.normalization import algorithms
        from specreg.normalization.capabilities import NEWEST_KNOWN
        from specreg.normalization.core import _read_envelope
        from specreg.normalization.fields import Fields
        from specreg.normalization.plan import Context
        from test_packaging import example_plugin_config
        algo = algorithms.get("example_eagle3")
        cfg = example_plugin_config()
        cfg["residual_norm_first"], cfg["draft_vocab_size"] = True, 32000
        fields = Fields(cfg)
        algo.function(fields, Context(vllm=NEWEST_KNOWN, source=None, envelope=_read_envelope(Fields(cfg), NEWEST_KNOWN)[0]))
        print(json.dumps([sorted(fields.reads), sorted(row.name for row in algo.fields())]))
    """
    out = _run(code, tmp_path)
    assert out.returncode == 0, out.stderr
    read, documented = json.loads(out.stdout)
    assert read == documented and "feature_layers" in read


def test_the_refused_types_are_one_table_naming_the_newest_known_vllm():
    import re

    import specreg.algos
    from specreg.normalization.capabilities import NEWEST_KNOWN, short

    assert set(specreg.algos.REFUSED) == {a.name for a in specreg.algorithms() if a.unservable}
    for name in ("mtp", "xpress"):
        assert (
            f"(vLLM {short(NEWEST_KNOWN)} accepts eagle3, peagle, dflash, dflash2 and dspark)"
            in algorithms.get(name).unservable
        )
    assert not re.search(r"vLLM \d", Path(specreg.algos.__file__).read_text())  # no version typed in


def test_rows_several_algorithms_share_are_written_once_beside_their_reader():
    import specreg.algos
    from specreg.normalization.fields import LAYER_CONFIG_ROW, VOCAB_ROWS
    from specreg.normalization.shape import LAYER_SHAPE_ROWS

    for path in Path(specreg.algos.__file__).parent.glob("*.py"):
        for row in (LAYER_CONFIG_ROW, *VOCAB_ROWS, *LAYER_SHAPE_ROWS):
            assert row not in path.read_text(), (path.name, row)
    documented = {row.name for row in algorithms.get("eagle3").fields()}
    assert {"transformer_layer_config", "transformer_layer_config.head_dim", "draft_vocab_size"} <= documented


def test_a_docstring_naming_no_shared_rows_is_an_error():
    def draft(cfg, ctx):
        """A draft.

        | field | type | required / default | why |
        |---|---|---|---|
        {LAYER_ROWS}
        """

    with pytest.raises(specreg.RegistryError, match=r"names \{LAYER_ROWS\}: the shared rows are"):
        algorithms.shared_rows(draft)


def test_an_unknown_type_names_the_value_the_known_types_and_the_closest():
    cfg = fixture_config("dflash")
    cfg["speculators_model_type"] = "dflsh"
    with pytest.raises(specreg.UnknownAlgorithmError) as info:
        specreg.normalize(cfg)
    message = str(info.value)
    assert info.value.path == "$.speculators_model_type"
    assert "'dflsh'" in message
    assert "did you mean 'dflash'?" in message
    assert "dflash, dflash2, dspark, eagle, eagle3, independent, mlp, mtp, peagle, xpress" in message
    assert isinstance(info.value, specreg.ConfigError)
