"""The algorithm registry: built-ins, collisions, plugins, and each module's docstring table."""

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import specreg
from specreg.normalization import algorithms
from conftest import fixture_config


def fixtures_of(name: str) -> list[str]:
    """The fixtures of tests/data/speculators whose speculators_model_type is `name` (every algorithm has
    one: the contract tests of tests/test_normalization_algorithms.py fail without it)."""
    from conftest import SPECULATORS_DIRS

    return sorted(
        p.stem
        for folder in SPECULATORS_DIRS
        for p in folder.glob("*.json")
        if json.loads(p.read_text()).get("speculators_model_type") == name
    )


def test_every_builtin_is_registered_by_its_module():
    algos = {a.name: a for a in specreg.algorithms()}
    assert set(algorithms.builtin()) <= set(algos)
    for name, module in algorithms.builtin().items():
        assert algos[name].module == module


@pytest.mark.parametrize("name", sorted(algorithms.builtin()))
def test_a_builtins_first_vllm_version_comes_from_the_facts(name):
    """A built-in served by vLLM names its dated rule, and its first version is that rule's first
    release in the per-release facts (no version typed in algos/); a type no vLLM release maps itself
    has none; a refused type has its REFUSED reason."""
    from packaging.version import Version

    from specreg import facts

    algo = algorithms.get(name)
    if algo.unservable:
        assert algo.method is None and algo.vllm_min is None
        assert algo.unservable == algorithms._refused()[name]
    elif not algo.vllm_maps:
        assert algo.vllm_min is None and algo.rule is None and algo.since == "not mapped"
    else:
        # the version typed in the facts for a rule older than every tracked release, else its first run's
        assert algo.rule is not None
        first = facts.metadata()[algo.rule].get("since") or facts.rule_spans(algo.rule)[0][0]
        assert algo.vllm_min == Version(first)
        assert [algo.served_by(Version(r)) for r in facts.known()] == [facts.holds(algo.rule, r) for r in facts.known()]


def test_the_refused_builtins_are_the_refused_table():
    algos = {a.name: a for a in specreg.algorithms()}
    assert {n for n, a in algos.items() if a.unservable} == set(algorithms._refused())
    assert all(a.method is not None for n, a in algos.items() if n not in algorithms._refused())


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
    for fixture in fixtures_of(name):
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
    assert ["dflash2", "dflash", "0.29", "specreg.algos.dflash2"] in [
        line.split() for line in result.stdout.splitlines()
    ]
    assert result.stderr.splitlines() == [
        "specreg: the algorithm plugin broken = my_broken (package "
        "specreg-test-plugin 1.0) failed: RuntimeError: boom; it is skipped"
    ]


NEW = Path(__file__).parent / "new_algorithm"


@pytest.fixture
def added_algorithm(tmp_path, monkeypatch):
    """A copy of algos/ plus tests/new_algorithm/causal_dflash.py (a DFlash variant whose
    `all_causal` field makes every layer causal, served only through specreg) as the built-in package,
    and its fixture beside the others: what a maintainer adds, and nothing else."""
    import shutil

    import conftest
    import specreg.algos

    pkg = tmp_path / "added" / "tmpalgos"
    shutil.copytree(Path(specreg.algos.__file__).parent, pkg, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(NEW / "causal_dflash.py", pkg / "causal_dflash.py")
    (tmp_path / "added" / "speculators").mkdir()
    shutil.copy(NEW / "causal_dflash.json", tmp_path / "added" / "speculators" / "causal_dflash.json")
    before = set(algorithms.builtin())
    monkeypatch.syspath_prepend(str(tmp_path / "added"))
    monkeypatch.setattr(algorithms, "BUILTIN_PACKAGE", "tmpalgos")
    monkeypatch.setattr(algorithms, "_builtin", None)
    monkeypatch.setattr(algorithms, "_registered", {})
    # the list itself, which the contract tests imported by name
    conftest.SPECULATORS_DIRS.append(tmp_path / "added" / "speculators")
    assert set(algorithms.builtin()) == before | {"causal_dflash"}
    assert "tmpalgos.causal_dflash" not in sys.modules  # listed, not imported
    yield tmp_path / "added"
    conftest.SPECULATORS_DIRS.remove(tmp_path / "added" / "speculators")
    for module in [m for m in sys.modules if m.split(".")[0] == "tmpalgos"]:
        del sys.modules[module]


def _cli(argv, capsys):
    from specreg.cli.main import main

    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_a_new_variant_is_one_file_and_its_fixture(added_algorithm, tmp_path, capsys):
    """show, check, serve --config-only, the read-back of what it wrote and the SGLang export serve the
    new variant as trained, every layer causal because of its field, with no edit outside algos/."""
    draft = tmp_path / "draft"
    draft.mkdir()
    (draft / "config.json").write_text((NEW / "causal_dflash.json").read_text())
    spec = specreg.load(str(draft))
    assert spec.algorithm == "causal_dflash" and spec.method == "dflash" and not spec.errors
    assert [a.causal for a in spec.attention] == [True] * 5
    assert spec.provenance["attention[0]"].sources == ("$.all_causal",)
    assert spec.provenance["attention[0]"].why == "all_causal = true: the trainer masks every layer causally"
    assert [f.message for f in spec.findings if f.code == "mask-set-by-field"] == [
        "all_causal = true sets the mask of layers 0, 1, 2, 3, 4: the trainer masks every layer causally"
    ]
    assert spec.draft_config["is_causal"] is True  # the newest vLLM reads is_causal before any other rule

    code, out, _ = _cli(["show", str(draft)], capsys)
    assert code == 0 and "mask-set-by-field" in out and "vllm-maps-through-specreg" in out
    assert "specreg's plugin active" in out
    from hostile_helpers import local_verifier

    code, out, err = _cli(["check", str(draft), "--verifier", str(local_verifier(tmp_path)), "--no-weights"], capsys)
    assert code == 0 and "vllm-maps-through-specreg" in out, out + err
    served = tmp_path / "served"
    code, out, err = _cli(["serve", str(draft), "--config-only", "--dir", str(served)], capsys)
    assert code == 0, err
    assert "--speculative-config" in out and str(served) in out  # the materialized directory, not the file
    assert "no vLLM release maps causal_dflash itself" in err

    back = specreg.load(str(served))
    assert back.format == "materialized" and back.algorithm == "causal_dflash" and not back.errors
    assert [a.causal for a in back.attention] == [True] * 5
    assert back.draft_config["is_causal"] is True

    from specreg.sglang.export import export

    plan = export(spec)
    assert not [f.message for f in plan.findings if f.severity == "error"]
    assert plan.config["is_causal"] is True and plan.config["architectures"] == ["DFlashDraftModel"]
    assert plan.flags[:2] == ("--speculative-algorithm", "DFLASH")


def test_the_contract_tests_hold_the_new_variant(added_algorithm, tmp_path):
    """Every contract test (a test of tests/test_normalization_algorithms.py parametrized by the
    registry's names, and this file's docstring check) run on the new variant, in this process."""
    import inspect

    import test_normalization_algorithms as contract

    known = {a.name for a in algorithms.algorithms()}
    assert "causal_dflash" in known
    run = []
    for fn in [*vars(contract).values(), test_docstring_table_lists_exactly_the_fields_the_function_reads]:
        marks = [m for m in getattr(fn, "pytestmark", []) if m.name == "parametrize" and m.args[0] == "name"]
        # parametrized by the registry: over the algorithms' names (a plugin test's names are its own)
        if not callable(fn) or not fn.__name__.startswith("test_") or not marks or not set(marks[0].args[1]) <= known:
            continue
        where = tmp_path / fn.__name__
        where.mkdir()
        fn(
            **{
                "name": "causal_dflash",
                **({"tmp_path": where} if "tmp_path" in inspect.signature(fn).parameters else {}),
            }
        )
        run.append(fn.__name__)
    assert len(run) >= 7, run


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
    # the types the newest release maps, by the registrations' own rules (0.34 dropped peagle's mapping,
    # which a hand-typed list here kept naming)
    mapped = sorted(a.name for a in specreg.algorithms() if a.method and a.rule and a.served_by(NEWEST_KNOWN))
    for name in ("mtp", "xpress"):
        said = re.search(r"\(vLLM (\S+) accepts ([^)]*)\)", algorithms.get(name).unservable)
        assert said and said.group(1) == short(NEWEST_KNOWN)
        assert re.split(r", | and ", said.group(2)) == mapped
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
    assert f"Known: {', '.join(sorted(algorithms.builtin()))}." in message
    assert isinstance(info.value, specreg.ConfigError)


def _compares_a_name(node, names) -> bool:
    """Whether an ast.Compare tests a value against one of `names` (a string, or a tuple, list or set
    of strings); a comparison with vLLM's method (`method`, `x.method`) is vLLM's word, not a type."""
    sides = [node.left, *node.comparators]
    if any(
        isinstance(s, ast.Attribute) and s.attr == "method" or isinstance(s, ast.Name) and s.id == "method"
        for s in sides
    ):
        return False
    for side in sides:
        items = side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]
        if any(isinstance(i, ast.Constant) and i.value in names for i in items):
            return True
    return False


def places_asking_by_name(root: Path, names: set) -> list[str]:
    """Every comparison of a registered algorithm's name in the code under `root`, as FILE:LINE: CODE
    (only a file that quotes a name is parsed)."""
    import re

    quoted = re.compile("|".join(f"[\"']{re.escape(n)}[\"']" for n in sorted(names)))
    texts = {path: path.read_text() for path in sorted(root.rglob("*.py"))}
    return [
        f"{path.relative_to(root.parent)}:{node.lineno}: {ast.unparse(node)}"
        for path, text in texts.items()
        if quoted.search(text)
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.Compare) and _compares_a_name(node, names)
    ]


def test_no_code_outside_algos_compares_an_algorithm_name():
    """Code outside algos/ asks a registration for a trait (its variant, vllm_maps, method), never its
    name: a new algorithm is one file. (Issue 57 counted 29 such comparisons before the traits.)"""
    names = {a.name for a in specreg.algorithms()}
    assert places_asking_by_name(Path(specreg.__file__).parent, names) == []


def test_the_name_scan_finds_a_comparison(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text(
        "def f(spec, method):\n"
        "    a = spec.algorithm == 'dspark'\n"
        "    b = spec.algorithm in ('eagle3', 'x')\n"
        "    c = method == 'dflash'\n"
        "    return a, b, c\n"
    )
    assert places_asking_by_name(tmp_path / "pkg", {"dspark", "eagle3", "dflash"}) == [
        "pkg/m.py:2: spec.algorithm == 'dspark'",
        "pkg/m.py:3: spec.algorithm in ('eagle3', 'x')",
    ]
