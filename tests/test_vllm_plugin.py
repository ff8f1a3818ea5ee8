"""The vLLM plugin's safety rules, in fresh interpreters (no vLLM needed: the version gate reads the
dist-info of the distribution that provides the `vllm` package, which these tests lay on sys.path
with an empty `vllm` package; the mapping itself is tested
against each wheel's code in tests/conformance/test_vllm_plugin.py and in vLLM 0.33 in the vLLM tier)."""

import json
import os
import subprocess
import sys

import pytest
from pathlib import Path

REGISTER = (
    "import logging, sys; logging.basicConfig(level=logging.INFO, stream=sys.stderr, format='%(message)s');"
    "from specreg.vllm.plugin import register; register(); register()"
)


def run(tmp_path, version, **env):
    site = tmp_path / "site"
    (site / f"vllm-{version}.dist-info").mkdir(parents=True)
    (site / f"vllm-{version}.dist-info" / "METADATA").write_text(f"Name: vllm\nVersion: {version}\n")
    (site / f"vllm-{version}.dist-info" / "RECORD").write_text("vllm/__init__.py,,\n")
    (site / "vllm" / "engine").mkdir(parents=True)
    (site / "vllm" / "__init__.py").write_text("")
    # what the plugin imports to patch vLLM; imported only when the version gate lets it through
    (site / "vllm" / "engine" / "__init__.py").write_text("print('vllm.engine imported')\n")
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]), **env}
    return subprocess.run([sys.executable, "-c", REGISTER], capture_output=True, text=True, env=environ, timeout=60)


def test_an_untested_vllm_gets_one_line_and_no_change(tmp_path):
    out = run(tmp_path, "0.40.0")
    assert out.returncode == 0
    assert out.stderr.count("outside the tested range") == 1, out.stderr  # register() ran twice
    assert "vllm.engine imported" not in out.stdout


def test_the_switch_turns_it_off_with_one_line(tmp_path):
    out = run(tmp_path, "0.33.0", SPECREG_VLLM_PLUGIN="0")
    assert out.returncode == 0
    assert out.stderr.count("specreg plugin off (SPECREG_VLLM_PLUGIN=0)") == 1
    assert "vllm.engine imported" not in out.stdout


def test_a_failure_inside_the_plugin_never_stops_vllm(tmp_path):
    # a tested version number but no importable vLLM package: the plugin logs why and returns
    out = run(tmp_path, "0.33.0")
    assert out.returncode == 0, out.stderr
    assert out.stderr.count("specreg plugin not installed (ModuleNotFoundError") == 1, out.stderr
    assert "vllm.engine imported" in out.stdout  # the gate let it through: this is the failure path


def test_the_entry_point_is_declared_for_vllm():
    from importlib.metadata import entry_points

    (ep,) = [e for e in entry_points(group="vllm.general_plugins") if e.name == "specreg"]
    assert ep.value == "specreg.vllm.plugin:register"


@pytest.mark.parametrize("value", ["0", "false", "off", "no"])
def test_every_off_spelling_turns_it_off(tmp_path, value):
    assert "specreg plugin off" in run(tmp_path, "0.33.0", SPECREG_VLLM_PLUGIN=value).stderr


class Args:
    """What the plugin reads of vLLM's EngineArgs before `create_speculative_config` (0.22+ names)."""

    def __init__(self, speculative_config=None, spec_model=None, spec_method=None, spec_tokens=None):
        self.speculative_config, self.spec_model = speculative_config, spec_model
        self.spec_method, self.spec_tokens = spec_method, spec_tokens


@pytest.fixture
def dflash_dir(tmp_path):
    import shutil
    from pathlib import Path

    draft = tmp_path / "draft-a"
    draft.mkdir()
    shutil.copy(Path(__file__).parent.parent / "examples" / "qwen3-8b-dflash" / "config.json", draft)
    return str(draft)


def test_a_named_speculators_draft_gets_its_trained_method_and_length_through_the_setting_used(dflash_dir):
    from specreg.vllm.plugin import _fill_named_draft

    given = Args(speculative_config={"model": dflash_dir})
    _fill_named_draft(given, "0.33.0")
    assert given.speculative_config == {"model": dflash_dir, "method": "dflash", "num_speculative_tokens": 15}
    flags = Args(spec_model=dflash_dir, spec_tokens=3)
    _fill_named_draft(flags, "0.33.0")  # vLLM refuses a key given both ways: the --spec-* attributes are filled
    assert (flags.speculative_config, flags.spec_method, flags.spec_tokens) == (None, "dflash", 3)
    told = Args(speculative_config={"model": dflash_dir, "method": "draft_model"})
    _fill_named_draft(told, "0.33.0")
    assert told.speculative_config == {"model": dflash_dir, "method": "draft_model"}  # the user's choice stays


def test_a_named_draft_that_is_not_speculators_is_left_to_vllm(tmp_path):
    import json

    from specreg.vllm.plugin import _fill_named_draft

    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama", "architectures": ["LlamaForCausalLM"]}))
    given = Args(speculative_config={"model": str(tmp_path), "num_speculative_tokens": 2})
    _fill_named_draft(given, "0.33.0")
    assert given.speculative_config == {"model": str(tmp_path), "num_speculative_tokens": 2}
    _fill_named_draft(Args(speculative_config={"method": "ngram"}), "0.33.0")  # no model: nothing read


# The plugin touches only what it plans, at the revision vLLM loads (issue 35, part 2)


def eagle3_length(k: int) -> bytes:
    import json

    from conftest import fixture_config

    cfg = fixture_config("eagle3_generated")
    cfg["speculators_config"]["proposal_methods"][0]["speculative_tokens"] = k
    return json.dumps(cfg).encode()


def resolved(hub) -> list[str]:
    """The revisions of config.json the loopback Hub was asked for."""
    return [path.split("/resolve/")[1].split("/")[0] for _, path, _ in hub.requests if "/resolve/" in path]


def test_a_named_hub_draft_is_planned_at_the_revision_vllm_loads(hub):
    from specreg.vllm.plugin import _fill_named_draft

    hub.add("org/draft", {"config.json": eagle3_length(15)})
    hub.add("org/draft", {"config.json": eagle3_length(7)}, ref="v1")
    given = Args(speculative_config={"model": "org/draft", "revision": "v1"})
    _fill_named_draft(given, "0.33.0")
    assert given.speculative_config == {
        "model": "org/draft",
        "revision": "v1",
        "method": "eagle3",
        "num_speculative_tokens": 7,
    }
    assert set(resolved(hub)) == {"v1"}


class Draft:
    """What the plugin reads of vLLM's SpeculativeConfig after `create_speculative_config`."""

    def __init__(self, model, method, revision=None):
        import types

        self.model, self.method, self.revision = model, method, revision
        self.draft_model_config = types.SimpleNamespace(hf_config=types.SimpleNamespace(), architectures=["X"])


def watched(sc):
    """A stand-in for vLLM's EngineArgs whose create_speculative_config returns `sc`, wrapped by the plugin."""
    from specreg.vllm.plugin import watch_native_drafts

    class EngineArgs:
        def create_speculative_config(self, target_model_config, target_parallel_config):
            return sc

    watch_native_drafts(EngineArgs, "0.33.0")
    return EngineArgs


@pytest.mark.parametrize(
    ("config", "sc"),
    [
        # an independent draft model, named with its method and length
        (
            {"model": "org/llama-68m", "method": "draft_model", "num_speculative_tokens": 5},
            Draft("org/llama-68m", "draft_model"),
        ),
        # MTP: vLLM's draft is the verifier itself
        ({"method": "mtp", "num_speculative_tokens": 1}, Draft("org/verifier", "mtp")),
        ({"model": "org/llama-68m", "method": "eagle", "num_speculative_tokens": 3}, Draft("org/llama-68m", "eagle")),
    ],
)
def test_a_named_draft_that_is_no_draft_specreg_plans_is_never_read_nor_logged(hub, caplog, config, sc):
    import json

    hub.add(
        "org/llama-68m",
        {"config.json": json.dumps({"model_type": "llama", "architectures": ["LlamaForCausalLM"]}).encode()},
    )
    hub.add(
        "org/verifier",
        {"config.json": json.dumps({"model_type": "deepseek_v3", "architectures": ["DeepseekV3ForCausalLM"]}).encode()},
    )
    args = Args(speculative_config=dict(config))
    with caplog.at_level("DEBUG"):
        assert watched(sc)().create_speculative_config.__func__(args, None, None) is sc
    assert args.speculative_config == config
    assert hub.count() == 0
    assert caplog.records == []


def test_a_native_draft_is_read_at_the_revision_vllm_loads(hub):
    hub.add("org/native", {"config.json": eagle3_length(15)})
    hub.add("org/native", {"config.json": eagle3_length(7)}, ref="v1")
    sc = Draft("org/native", "dflash", revision="v1")
    watched(sc).create_speculative_config(Args(), None, None)
    assert set(resolved(hub)) == {"v1"}


def test_a_speculators_draft_the_mapping_planned_is_not_read_again_and_a_different_method_is_logged(
    tmp_path, caplog, dflash_dir
):
    """The method the user gave is compared with what the speculators mapping planned while vLLM built
    the config (the file is not read a second time)."""
    import json

    from specreg.vllm import plugin

    config = json.loads((Path(dflash_dir) / "config.json").read_text())
    sc = Draft(dflash_dir, "draft_model")

    class EngineArgs:
        def create_speculative_config(self, target_model_config, target_parallel_config):
            assert plugin._plan(config, "0.33.0") is not None  # what vLLM's speculators loader calls
            (Path(dflash_dir) / "config.json").unlink()  # a read after this would fail
            return sc

    plugin.watch_native_drafts(EngineArgs, "0.33.0")
    args = Args(speculative_config={"model": dflash_dir, "method": "draft_model", "num_speculative_tokens": 3})
    with caplog.at_level("INFO"):
        assert EngineArgs.create_speculative_config(args, None, None) is sc
    said = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert said == [
        f"specreg: the draft {dflash_dir} was trained as 'dflash'; vLLM is told to serve it as 'draft_model'"
    ]


GUEST = "def dflash(cfg, ctx):\n    raise {raised}\n"


@pytest.mark.parametrize("raised", ["SystemExit(0)", "KeyboardInterrupt"])
def test_an_algorithm_plugin_that_would_end_vllm_falls_back_to_vllms_mapping_with_one_line(monkeypatch, caplog, raised):
    """A plugin module whose function has taken a built-in's place (here written into the registry,
    as another package's code could) and raises SystemExit or KeyboardInterrupt: vLLM's own mapping
    is used and one line names the plugin's module."""
    import types

    import attrs

    from conftest import fixture_config
    from specreg.normalization import algorithms
    from specreg.vllm import plugin

    guest = types.ModuleType("my_guest_plugin")
    exec(GUEST.format(raised=raised), guest.__dict__)
    monkeypatch.setitem(algorithms._registered, "dflash", attrs.evolve(algorithms.get("dflash"), function=guest.dflash))
    vllms = []
    algos = types.SimpleNamespace(
        SUPPORTED_SPECULATORS_TYPES={
            "dflash": lambda config_dict, pre_trained_config: vllms.append(config_dict["speculators_model_type"])
        }
    )

    class SpeculatorsConfig:
        pass

    plugin.install(algos, SpeculatorsConfig, "0.33.0")
    with caplog.at_level("INFO"):
        algos.SUPPORTED_SPECULATORS_TYPES["dflash"](config_dict=fixture_config("dflash"), pre_trained_config={})
    assert vllms == ["dflash"]
    name = raised.split("(")[0]
    assert [r.getMessage() for r in caplog.records] == [
        f"specreg: the algorithm plugin module my_guest_plugin raised {name} while specreg planned this speculators "
        "config; vLLM's own mapping is used"
    ]


def test_ctrl_c_inside_specreg_still_stops_vllm(monkeypatch):
    import types

    from conftest import fixture_config
    from specreg.normalization import core
    from specreg.vllm import plugin

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(core, "normalize", interrupted)
    algos = types.SimpleNamespace(SUPPORTED_SPECULATORS_TYPES={"dflash": lambda config_dict, pre_trained_config: None})
    plugin.install(algos, type("SpeculatorsConfig", (), {}), "0.33.0")
    with pytest.raises(KeyboardInterrupt):
        algos.SUPPORTED_SPECULATORS_TYPES["dflash"](config_dict=fixture_config("dflash"), pre_trained_config={})


def test_a_plugin_that_exits_at_import_never_ends_vllm(tmp_path):
    """A draft vLLM serves as eagle3 whose file is a speculators config of a plugin's type, with a
    plugin installed that calls sys.exit at import: the plugin is never imported (the file is the
    mapping's, not a native layout) and vLLM goes on."""
    import json

    from test_registry import _plugin_dist

    site = _plugin_dist(tmp_path, "bye = my_bye\n", {"my_bye": "import sys; sys.exit(0)\n"})
    draft = tmp_path / "draft"
    draft.mkdir()
    cfg = json.loads(eagle3_length(3))
    cfg["speculators_model_type"] = "medusa"
    (draft / "config.json").write_text(json.dumps(cfg))
    code = (
        "import sys, types; sys.path[:0] = [sys.argv[2]]\n"
        "from specreg.vllm.plugin import watch_native_drafts\n"
        "sc = types.SimpleNamespace(model=sys.argv[1], method='eagle3', revision=None,\n"
        "                           draft_model_config=types.SimpleNamespace(hf_config={}, architectures=['X']))\n"
        "class EngineArgs:\n"
        "    def create_speculative_config(self, a, b):\n"
        "        return sc\n"
        "watch_native_drafts(EngineArgs, '0.33.0')\n"
        "EngineArgs().create_speculative_config(None, None)\n"
        "print('vLLM goes on', 'my_bye' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(draft), str(site)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["vLLM goes on False"]


def test_the_methods_the_plugin_reads_native_drafts_for_are_those_of_the_builtin_algorithms():
    from specreg.vllm.plugin import _native_methods

    assert _native_methods() == {"eagle3", "dflash", "dspark"}


class VllmMapping:
    """A stand-in for vLLM's speculators mapping, as shaped in vllm/transformers_utils/configs/speculators
    (0.32.0, the engine venv's): `algos.SUPPORTED_SPECULATORS_TYPES` holds one updater per type, and
    `SpeculatorsConfig.extract_transformers_pre_trained_config` refuses a type the table lacks, then calls
    the type's updater on transformer_layer_config; `build_vllm_speculative_config` returns the type as
    the method with the first proposal's length."""

    def __init__(self, types=("eagle3", "peagle", "dflash", "dflash2", "dspark")):
        import types as t

        self.vllms = []
        table = {name: self._vllms_updater(name) for name in types}
        self.algos = t.SimpleNamespace(SUPPORTED_SPECULATORS_TYPES=table)

        class SpeculatorsConfig:
            @classmethod
            def extract_transformers_pre_trained_config(cls, config_dict):
                kind = config_dict.get("speculators_model_type")
                if kind not in table:
                    raise ValueError(
                        f"Expected one of: {table}. Please ensure you're loading a speculators-format model."
                    )
                pre_trained_config = config_dict.get("transformer_layer_config", {})
                table[kind](config_dict=config_dict, pre_trained_config=pre_trained_config)
                return pre_trained_config

            @classmethod
            def build_vllm_speculative_config(cls, config_dict):
                tokens = config_dict["speculators_config"]["proposal_methods"][0]["speculative_tokens"]
                return {"method": config_dict.get("speculators_model_type"), "num_speculative_tokens": tokens}

        self.config_class = SpeculatorsConfig

    def _vllms_updater(self, name):
        def update(config_dict, pre_trained_config):
            self.vllms.append(name)

        return update

    def draft_config(self, config):
        import copy

        return self.config_class.extract_transformers_pre_trained_config(copy.deepcopy(config))

    def speculative_config(self, config):
        import copy

        return self.config_class.build_vllm_speculative_config(copy.deepcopy(config))


def test_a_type_vllms_table_lacks_is_added_when_specreg_plans_it_and_removed_by_uninstall(monkeypatch):
    """A registered algorithm with a vLLM method is planned by the plugin whether or not vLLM's own
    table has its type (here dflash2, as in vLLM 0.26-0.28); vLLM's own types keep their function
    under specreg's, and uninstall puts the table back as it was."""
    import specreg
    from conftest import fixture_config
    from specreg.vllm import plugin

    m = VllmMapping(types=("eagle3", "dflash", "mystery"))
    before = dict(m.algos.SUPPORTED_SPECULATORS_TYPES)
    assert plugin.install(m.algos, m.config_class, "0.33.0") == ["eagle3", "dflash"]
    assert plugin.install(m.algos, m.config_class, "0.33.0") == []
    assert m.algos.SUPPORTED_SPECULATORS_TYPES["mystery"] is before["mystery"]  # no algorithm of specreg's
    cfg = fixture_config("dflash2")
    spec = specreg.normalize(cfg, vllm="0.33.0")
    assert m.draft_config(cfg) == spec.draft_config_dict()
    assert m.speculative_config(cfg) == {"method": "dflash", **spec.speculative_config_dict()}
    assert m.vllms == []
    plugin.uninstall(m.algos, m.config_class)
    assert m.algos.SUPPORTED_SPECULATORS_TYPES == before
    with pytest.raises(ValueError, match="Expected one of"):
        m.draft_config(cfg)


def test_a_refused_or_unknown_type_is_left_to_vllm():
    from conftest import fixture_config
    from specreg.vllm import plugin

    m = VllmMapping(types=("mtp", "unknown-type"))
    plugin.install(m.algos, m.config_class, "0.33.0")
    for name, fixture in (("mtp", "mtp"), ("unknown-type", "dflash")):
        cfg = fixture_config(fixture)
        cfg["speculators_model_type"] = name
        m.draft_config(cfg)
        assert m.speculative_config(cfg)["method"] == name
    assert m.vllms == ["mtp", "unknown-type"]
    plugin.uninstall(m.algos, m.config_class)


# Served as trained on every route, refused otherwise; never a raise of specreg's own (issue 45)

TRAINED = Path(__file__).parent / "data" / "trained"


@pytest.mark.parametrize(
    ("given", "filled"),
    [
        ({"num_speculative_tokens": 3}, {"method": "eagle3", "parallel_drafting": True}),
        ({"method": "eagle3"}, {"num_speculative_tokens": 3, "parallel_drafting": True}),
        ({"method": "eagle3", "num_speculative_tokens": 2}, {"parallel_drafting": True}),
        ({}, {"method": "eagle3", "num_speculative_tokens": 3, "parallel_drafting": True}),
    ],
)
def test_a_named_peagle_draft_gets_parallel_drafting_with_its_method_or_none(given, filled):
    """vLLM reads only method and length of a draft named beside its verifier: a P-EAGLE draft was
    served as EAGLE-3 without parallel drafting (served AL 2.00 against the trainer's 3.56)."""
    from specreg.vllm.plugin import _fill_named_draft

    draft = str(TRAINED / "peagle")
    args = Args(speculative_config={"model": draft, **given})
    _fill_named_draft(args, "0.32.0")
    assert args.speculative_config == {"model": draft, **given, **filled}


def test_a_peagle_draft_named_by_the_spec_flags_gets_parallel_drafting_in_the_dict():
    """vLLM has no --spec-* flag for parallel drafting; it merges the flags into the dict."""
    from specreg.vllm.plugin import _fill_named_draft

    args = Args(spec_model=str(TRAINED / "peagle"), spec_tokens=3)
    _fill_named_draft(args, "0.32.0")
    assert (args.speculative_config, args.spec_method, args.spec_tokens) == ({"parallel_drafting": True}, "eagle3", 3)


def test_parallel_drafting_the_user_turns_off_stays_off_and_is_logged(caplog):
    from specreg.vllm import plugin

    draft = str(TRAINED / "peagle")
    config = json.loads((TRAINED / "peagle" / "config.json").read_text())
    sc = Draft(draft, "eagle3")
    sc.parallel_drafting = False

    class EngineArgs:
        def create_speculative_config(self, target_model_config, target_parallel_config):
            assert plugin._plan(config, "0.32.0") is not None
            return sc

    plugin.watch_native_drafts(EngineArgs, "0.32.0")
    args = Args(speculative_config={"model": draft, "method": "eagle3", "parallel_drafting": False})
    with caplog.at_level("WARNING"):
        EngineArgs.create_speculative_config(args, None, None)
    assert args.speculative_config["parallel_drafting"] is False  # the user's choice stays
    assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == [
        f"specreg: the draft {draft} was trained with parallel_drafting=True; vLLM is told to serve it with "
        "parallel_drafting=False"
    ]


def dflash_out_of_order() -> dict:
    from conftest import fixture_config

    cfg = fixture_config("dflash")
    cfg["aux_hidden_state_layer_ids"] = [5, 2]  # ids must increase: vLLM's mapping takes them as given
    return cfg


def test_a_file_specreg_calls_invalid_stops_vllm_with_specregs_error_and_the_way_out():
    from specreg.vllm import plugin

    m = VllmMapping()
    plugin.install(m.algos, m.config_class, "0.33.0")
    for read in (m.draft_config, m.speculative_config):
        with pytest.raises(plugin.Refusal) as info:
            read(dflash_out_of_order())
        assert str(info.value) == (
            "specreg: this draft cannot be served as it was trained by this vLLM:\n"
            "  $.aux_hidden_state_layer_ids[1]: layer id 2 is smaller than the one before; ids must be unique and "
            "increasing\n"
            "(specreg check explains; SPECREG_VLLM_PLUGIN=0 serves it with vLLM's own mapping anyway)"
        )
    assert m.vllms == []  # vLLM's own mapping never ran
    plugin.uninstall(m.algos, m.config_class)


def test_a_named_draft_specreg_calls_invalid_is_refused_before_vllm_reads_it(tmp_path):
    from specreg.vllm import plugin

    (tmp_path / "config.json").write_text(json.dumps(dflash_out_of_order()))
    with pytest.raises(plugin.Refusal, match="layer id 2 is smaller than the one before"):
        plugin._fill_named_draft(Args(speculative_config={"model": str(tmp_path)}), "0.33.0")


def test_a_failure_of_specreg_itself_is_one_line_and_vllms_own_mapping(monkeypatch, caplog):
    from conftest import fixture_config
    from specreg.normalization import core
    from specreg.vllm import plugin

    def broken(*args, **kwargs):
        raise RuntimeError("a bug in specreg")

    monkeypatch.setattr(core, "normalize", broken)
    plugin._logged.clear()
    m = VllmMapping()
    plugin.install(m.algos, m.config_class, "0.33.0")
    with caplog.at_level("WARNING"):
        m.draft_config(fixture_config("dflash"))
        m.draft_config(fixture_config("dflash"))
    assert m.vllms == ["dflash", "dflash"]
    assert [r.getMessage() for r in caplog.records] == [
        "specreg could not plan this speculators config (RuntimeError: a bug in specreg); vLLM's own mapping is used"
    ]
    plugin.uninstall(m.algos, m.config_class)


def json_values():
    from hypothesis import strategies as st

    scalars = st.none() | st.booleans() | st.integers(-3, 70000) | st.floats(allow_nan=True) | st.text(max_size=8)
    return st.recursive(
        scalars | st.sampled_from(["eagle3", "peagle", "dflash", "dspark", "mtp"]),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
        max_leaves=8,
    )


def raised_in_specreg(exc: BaseException) -> str | None:
    """The specreg frame an exception was raised in (its innermost frame), or None."""
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)
    where = frames[-1].filename if frames else ""
    return where if f"{os.sep}specreg{os.sep}" in where and f"{os.sep}tests{os.sep}" not in where else None


def test_whatever_a_config_holds_the_plugin_never_raises_from_specregs_code(monkeypatch):
    """A hostile value at any key (a list as speculators_model_type was a TypeError at plugin.py:142):
    each read ends in specreg's plan, specreg's refusal, or vLLM's own mapping and its errors."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from conftest import fixture_config
    from specreg.vllm import plugin

    m = VllmMapping()
    plugin.install(m.algos, m.config_class, "0.33.0")
    paths = [
        ("speculators_model_type",),
        ("speculators_config",),
        ("speculators_config", "proposal_methods"),
        ("speculators_config", "verifier"),
        ("transformer_layer_config",),
        ("transformer_layer_config", "num_hidden_layers"),
        ("aux_hidden_state_layer_ids",),
        ("block_size",),
    ]

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(fixture=st.sampled_from(["dflash", "eagle3_generated"]), path=st.sampled_from(paths), value=json_values())
    def hostile(fixture, path, value):
        cfg = fixture_config(fixture)
        at = cfg
        for key in path[:-1]:
            at = at.setdefault(key, {}) if isinstance(at.get(key), dict) else at.setdefault(key, {})
        at[path[-1]] = value
        for read in (m.draft_config, m.speculative_config):
            try:
                read(cfg)
            except plugin.Refusal:
                pass
            except Exception as exc:  # vLLM's own mapping (here the stand-in) may refuse it its own way
                assert raised_in_specreg(exc) is None, (path, value, type(exc).__name__, exc)

    try:
        hostile()
    finally:
        plugin.uninstall(m.algos, m.config_class)


class Verifier:
    """What the plugin reads of vLLM's target ModelConfig: the verifier vLLM runs the draft with."""

    def __init__(self, model, **config):
        import types

        self.model = model
        self.hf_config = types.SimpleNamespace(to_dict=lambda: dict(config))


def test_a_draft_that_does_not_fit_the_verifier_vllm_runs_is_refused_at_startup():
    """The DFlash example reads Qwen3-8B's layers up to 34 at hidden size 4096 (issue 45)."""
    from conftest import fixture_config
    from specreg.vllm import plugin

    config = fixture_config("dflash")
    sc = Draft("org/dflash", "dflash")

    class EngineArgs:
        def create_speculative_config(self, target_model_config, target_parallel_config):
            assert plugin._plan(config, "0.33.0") is not None
            return sc

    plugin.watch_native_drafts(EngineArgs, "0.33.0")
    trained = Verifier("Qwen/Qwen3-8B", num_hidden_layers=36, hidden_size=4096, vocab_size=151936)
    assert EngineArgs.create_speculative_config(Args(), trained, None) is sc
    small = Verifier("org/small", num_hidden_layers=12, hidden_size=5376, vocab_size=151936)
    with pytest.raises(plugin.Refusal) as info:
        EngineArgs.create_speculative_config(Args(), small, None)
    said = str(info.value)
    assert "verifier-layer-out-of-range: aux layer ids [" in said and "outside org/small's 12 layers" in said
    assert "verifier-hidden-size-mismatch: the draft expects target hidden size 4096; org/small has 5376" in said
    assert said.endswith(
        "(`specreg check DRAFT --verifier org/small` explains; SPECREG_VLLM_PLUGIN=0 serves it with vLLM's "
        "own mapping anyway)"
    )
