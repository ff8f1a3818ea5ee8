"""Algorithm plugins are guests (issue 35): an entry point of `specreg.algorithms` that exits, is
interrupted, fails half-way, or replaces an algorithm registered before it is one line naming its
package and is rolled back; the rest of specreg goes on. Each case runs in a fresh interpreter with
the plugin's dist-info on sys.path, as pip installs one."""

import json

import pytest

from conftest import fixture_config
from test_registry import PLUGIN, _plugin_dist, _run

CLI = "import sys; from specreg.cli.main import main; sys.exit(main(sys.argv[1:]))"


def line(entry: str, value: str, error: str) -> str:
    return f"specreg: the algorithm plugin {entry} = {value} (package specreg-test-plugin 1.0) failed: {error}; it is skipped"


def cli(tmp_path, site, *argv):
    import subprocess
    import sys

    script = f"import sys; sys.path[:0] = [{str(site)!r}]\n" + CLI
    return subprocess.run([sys.executable, "-c", script, *argv], capture_output=True, text=True, cwd=tmp_path,
                          timeout=60)


def medusa_config(tmp_path):
    cfg = fixture_config("eagle3_generated")
    cfg["speculators_model_type"] = "medusa"
    (tmp_path / "medusa").mkdir()
    (tmp_path / "medusa" / "config.json").write_text(json.dumps(cfg))
    return str(tmp_path / "medusa")


@pytest.mark.parametrize(("body", "error"), [
    ("import sys; sys.exit(0)\n", "SystemExit: it called sys.exit(0)"),
    ("raise SystemExit\n", "SystemExit: it called sys.exit()"),
    ("raise KeyboardInterrupt\n", "KeyboardInterrupt"),
])
def test_a_plugin_that_exits_or_is_interrupted_at_import_is_one_line_and_the_rest_goes_on(tmp_path, body, error):
    site = _plugin_dist(tmp_path, "bye = my_bye\nmedusa = my_medusa\n", {"my_bye": body, "my_medusa": PLUGIN})
    listed = cli(tmp_path, site, "algorithms")
    assert listed.returncode == 0, listed.stderr
    assert listed.stderr.splitlines() == [line("bye", "my_bye", error)]
    assert "medusa       medusa       0.10        my_medusa" in listed.stdout
    shown = cli(tmp_path, site, "show", medusa_config(tmp_path))
    assert shown.stderr.splitlines() == [line("bye", "my_bye", error)]
    assert shown.returncode == 0 and "(medusa, speculators" in shown.stdout


HALFWAY = PLUGIN.replace('"medusa"', '"halfway"') + "\nraise ImportError('needs torch_npu')\n"


def test_a_plugin_that_registers_then_fails_at_import_is_unregistered(tmp_path):
    site = _plugin_dist(tmp_path, "halfway = my_halfway\n", {"my_halfway": HALFWAY})
    out = _run("""
        import specreg
        from specreg.normalization import algorithms
        print("halfway" in {a.name for a in specreg.algorithms()})
        try:
            algorithms.get("halfway")
        except specreg.UnknownAlgorithmError as exc:
            print(type(exc).__name__)
        print([b.entry_point for b in algorithms.broken_plugins()])
    """, tmp_path, site)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["False", "UnknownAlgorithmError", "['halfway']"]
    assert out.stderr.splitlines() == [line("halfway", "my_halfway", "ImportError: needs torch_npu")]


def test_a_failed_plugin_that_imported_a_builtin_leaves_the_builtin_served(tmp_path):
    body = "import specreg.algos.dflash\nraise ImportError('needs torch_npu')\n"
    site = _plugin_dist(tmp_path, "leans = my_leans\n", {"my_leans": body})
    out = _run(f"""
        import json, specreg
        from specreg.normalization import algorithms
        algorithms.load_plugins()
        print(specreg.normalize(json.loads({json.dumps(json.dumps(fixture_config("dflash")))}), vllm="0.33").method)
    """, tmp_path, site)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["dflash"]


# three ways a plugin's import can take the built-in dflash over
REPLACING = {
    "the registry's table": ("import attrs\nfrom specreg.normalization import algorithms\n"
                             "algorithms._registered['dflash'] = attrs.evolve(algorithms.get('dflash'), method='eagle3')\n",
                             "it replaced the built-in algorithm 'dflash' of specreg.algos.dflash:dflash with "
                             "specreg.algos.dflash:dflash"),
    "a borrowed module name": ("import specreg\n"
                               "def dflash(cfg, ctx):\n    return None\n"
                               "dflash.__module__ = 'specreg.algos.dflash'\n"
                               "specreg.register_speculator('dflash', method='eagle3')(dflash)\n",
                               "RegistryError: speculator algorithm 'dflash' is registered twice: first by the "
                               "built-in specreg.algos.dflash, again by specreg.algos.dflash:dflash"),
    "its module reloaded": ("import importlib, specreg.algos.dflash\nimportlib.reload(specreg.algos.dflash)\n",
                            "it replaced the built-in algorithm 'dflash' of specreg.algos.dflash:dflash with "
                            "specreg.algos.dflash:dflash"),
}


@pytest.mark.parametrize("how", sorted(REPLACING))
def test_a_plugin_replacing_a_builtin_is_reported_and_the_builtin_kept(tmp_path, how):
    body, error = REPLACING[how]
    site = _plugin_dist(tmp_path, "taker = my_taker\n", {"my_taker": body})
    out = _run(f"""
        import json, specreg
        print({{a.name: a.method for a in specreg.algorithms()}}["dflash"])
        spec = specreg.normalize(json.loads({json.dumps(json.dumps(fixture_config("dflash")))}), vllm="0.33")
        print(spec.method, [f.code for f in spec.errors])
    """, tmp_path, site)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["dflash", "dflash []"]
    assert out.stderr.splitlines() == [line("taker", "my_taker", error)]


def test_a_plugin_replacing_another_plugins_algorithm_is_reported(tmp_path):
    body = ("import attrs\nfrom specreg.normalization import algorithms\n"
            "algorithms._registered['medusa'] = attrs.evolve(algorithms.get('medusa'), method='eagle3')\n")
    site = _plugin_dist(tmp_path, "medusa = my_medusa\ntaker = my_taker\n", {"my_medusa": PLUGIN, "my_taker": body})
    out = _run("from specreg.normalization import algorithms; print(algorithms.get('medusa').method)", tmp_path, site)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["medusa"]
    assert out.stderr.splitlines() == [line("taker", "my_taker", "it replaced the algorithm 'medusa' of my_medusa:medusa "
                                                                 "with my_medusa:medusa")]


def test_an_algorithm_name_with_terminal_controls_is_refused_and_printed_escaped(tmp_path):
    site = _plugin_dist(tmp_path, "evil = my_evil\n", {"my_evil": PLUGIN.replace('"medusa"', '"medusa\\x1b[2J"')})
    out = cli(tmp_path, site, "algorithms")
    assert out.returncode == 0, out.stderr
    assert "\x1b" not in out.stdout + out.stderr
    assert out.stderr.splitlines() == [line("evil", "my_evil", "RegistryError: algorithm name 'medusa\\x1b[2J': a name is the "
                                            "speculators_model_type string, lower-case letters, digits, '_' and '-', "
                                            "starting with a letter")]


def test_a_plugins_module_name_is_printed_escaped(tmp_path):
    body = PLUGIN + "\nmedusa.__module__ = 'my\\x1b[2Jmedusa'\n"
    body = body.replace('@register_speculator("medusa", method="medusa", vllm_min="0.10")\n', "")
    body += 'register_speculator("medusa", method="medusa", vllm_min="0.10")(medusa)\n'
    site = _plugin_dist(tmp_path, "medusa = my_medusa\n", {"my_medusa": body})
    out = cli(tmp_path, site, "algorithms")
    assert out.returncode == 0 and out.stderr == "", out.stderr
    assert "\x1b" not in out.stdout
    assert "medusa       medusa       0.10        my\\x1b[2Jmedusa" in out.stdout


def test_a_slow_plugin_slows_no_builtin(tmp_path):
    """While a plugin's import is still running in one thread, a built-in draft is normalized in another:
    the registry is not held for a guest's import (and a built-in never loads the plugins at all)."""
    gate = "import threading\nENTERED, RELEASE = threading.Event(), threading.Event()\n"
    slow = "import gate\ngate.ENTERED.set()\ngate.RELEASE.wait(60)\n"
    site = _plugin_dist(tmp_path, "slow = my_slow\n", {"my_slow": slow, "gate": gate})
    out = _run(f"""
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
    """, tmp_path, site)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["['dflash'] True"]


def test_a_builtin_draft_never_imports_a_plugin(tmp_path):
    site = _plugin_dist(tmp_path, "bye = my_bye\n", {"my_bye": "import sys; sys.exit(7)\n"})
    out = _run(f"""
        import json, sys, specreg
        spec = specreg.normalize(json.loads({json.dumps(json.dumps(fixture_config("dflash")))}), vllm="0.33")
        print(spec.method, "my_bye" in sys.modules)
    """, tmp_path, site)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["dflash False"]
