"""What users install: the built wheel and sdist, in a fresh venv (not editable), with the smoke set.
Building and installing needs a package index and about 30 s, so those tests carry the `packaging`
marker: not in the default run; .ci/run runs them (`pytest -m packaging`)."""

import json
import os
import subprocess
import sys
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_every_package_folder_is_packaged():
    declared = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "specreg").rglob("__init__.py")}
    found |= {"specreg.algos", "specreg.catalog_data"}  # algos/ and registry/, mapped by package-dir
    assert declared == found


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The wheel and sdist, built by pip/build from this checkout (build isolation: its own setuptools)."""
    out = tmp_path_factory.mktemp("dist")
    run = subprocess.run(
        [sys.executable, "-m", "build", "--sdist", "--wheel", "--outdir", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    (wheel,) = out.glob("specreg-*.whl")
    (sdist,) = out.glob("specreg-*.tar.gz")
    return wheel, sdist


@pytest.mark.packaging
def test_the_wheel_holds_every_module_and_the_catalog(built):
    wheel, _ = built
    names = set(zipfile.ZipFile(wheel).namelist())
    for path in ROOT.joinpath("specreg").rglob("*.py"):
        assert f"specreg/{path.relative_to(ROOT / 'specreg').as_posix()}" in names, path
    for path in ROOT.joinpath("algos").glob("*.py"):
        assert f"specreg/algos/{path.name}" in names
    for path in ROOT.joinpath("specreg", "verify", "templates").iterdir():  # report's pages
        assert f"specreg/verify/templates/{path.name}" in names, path
    tomls = list(ROOT.joinpath("registry").rglob("*.toml"))
    assert tomls and all(f"specreg/catalog_data/{p.relative_to(ROOT / 'registry').as_posix()}" in names for p in tomls)
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "[vllm.general_plugins]" in text and "specreg = specreg.vllm.plugin:register" in text


@pytest.mark.packaging
def test_the_wheel_installed_in_a_fresh_venv_passes_the_smoke_set(built, tmp_path):
    wheel, _ = built
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    install = subprocess.run(
        [str(py), "-m", "pip", "install", "-q", f"{wheel}[verify]"], capture_output=True, text=True, timeout=900
    )
    assert install.returncode == 0, install.stderr[-3000:]
    bindir = env_dir / "bin"
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}", "SPECREG_CACHE": str(tmp_path / "c")}
    env.pop("PYTHONPATH", None)
    smoke = [
        [str(bindir / "specreg"), "show", str(ROOT / "examples" / "qwen3-8b-dflash")],
        [str(bindir / "specreg"), "verify", "--help"],
        [str(bindir / "specreg"), "catalog", "list"],
        [str(bindir / "specreg"), "--version"],
        [
            str(py),
            "-c",
            "import specreg.verify, specreg.vllm.plugin, specreg, sys; "
            "assert '/site-packages/' in specreg.__file__, specreg.__file__",
        ],
    ]
    for argv in smoke:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
        assert out.returncode == 0, (argv, out.stdout[-1000:], out.stderr[-2000:])
    # writing commands never edit the installed package: refused before any request, nothing written
    catalog_dir = subprocess.run(
        [str(py), "-c", "from specreg.entries import default_registry; print(default_registry())"],
        capture_output=True,
        text=True,
        env=env,
    ).stdout.strip()
    before = {p: p.read_bytes() for p in Path(catalog_dir).rglob("*.toml")}
    pin = subprocess.run(
        [str(bindir / "specreg"), "catalog", "pin", "RedHatAI/Qwen3-8B-speculator.dflash"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "HF_HUB_OFFLINE": "1"},
    )
    assert pin.returncode == 2, pin.stderr
    assert "refusing to write into the catalog of the installed specreg package" in pin.stderr
    assert "--registry DIR" in pin.stderr and len(pin.stderr.strip().splitlines()) == 1
    assert {p: p.read_bytes() for p in Path(catalog_dir).rglob("*.toml")} == before
    # the headline id offline: what the installed catalog knows, in one line
    offline = subprocess.run(
        [str(bindir / "specreg"), "show", "RedHatAI/gemma-4-31B-it-speculator.dflash"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "hf")},
    )
    assert offline.returncode == 2 and len(offline.stderr.strip().splitlines()) == 1, offline.stderr
    assert "is in specreg's catalog" in offline.stderr and "works offline" in offline.stderr
    # serve with vLLM's short form of a setting the catalog hints (tensor_parallel_size = 4): the user's -tp 2
    # wins and appears once (vLLM takes the last flag, so an added hint after it would deploy TP 4)
    from hub_server import FakeHub

    registry = tmp_path / "registry" / "org"
    registry.mkdir(parents=True)
    (registry / "draft.toml").write_text(
        'id = "org/draft"\nalgorithm = "dflash"\nstatus = "unpinned"\n\n[verifier]\nid = "Qwen/Qwen3-8B"\n\n'
        "[serving]\ntensor_parallel_size = 4\n"
    )
    with FakeHub() as hub:
        hub.add("org/draft", {"config.json": (ROOT / "examples" / "qwen3-8b-dflash" / "config.json").read_bytes()})
        served = subprocess.run(
            [
                str(bindir / "specreg"),
                "serve",
                "org/draft",
                "--config-only",
                "--dir",
                str(tmp_path / "d"),
                "--",
                "-tp",
                "2",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env={
                **env,
                "HF_ENDPOINT": hub.url,
                "HF_HUB_CACHE": str(tmp_path / "hf2"),
                "HF_HUB_OFFLINE": "0",
                "SPECREG_REGISTRY": str(tmp_path / "registry"),
            },
        )
    assert served.returncode == 0, served.stderr
    assert served.stdout.split()[-2:] == ["-tp", "2"] and "--tensor-parallel-size" not in served.stdout
    assert "you asked for 2" in served.stderr
    # check --gpu reads the attention facts installed with the package (specreg/vllm/facts/<X.Y>/attention_backends.json)
    (tmp_path / "verifier").mkdir()
    (tmp_path / "verifier" / "config.json").write_text(
        json.dumps(
            {
                "architectures": ["Qwen3ForCausalLM"],
                "model_type": "qwen3",
                "hidden_size": 4096,
                "num_hidden_layers": 36,
                "num_attention_heads": 32,
                "num_key_value_heads": 8,
                "head_dim": 128,
                "vocab_size": 151936,
            }
        )
    )
    gpu = subprocess.run(
        [
            str(bindir / "specreg"),
            "check",
            str(ROOT / "examples" / "qwen3-8b-dflash"),
            "--verifier",
            str(tmp_path / "verifier"),
            "--no-weights",
            "--vllm",
            "0.33",
            "--gpu",
            "H100",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert gpu.returncode == 0, gpu.stderr
    assert "H100 (sm_90), vLLM 0.33's attention selector" in gpu.stdout and "picks    FLASH_ATTN" in gpu.stdout
    # and the KV-cache facts (specreg/vllm/facts/<X.Y>/kv_cache.json): a sliding-window verifier whose page (3 KV heads)
    # does not divide the example DFlash's (8)
    (tmp_path / "sliding").mkdir()
    (tmp_path / "sliding" / "config.json").write_text(
        json.dumps(
            {
                "architectures": ["Qwen3ForCausalLM"],
                "model_type": "qwen3",
                "hidden_size": 4096,
                "num_hidden_layers": 36,
                "num_attention_heads": 24,
                "num_key_value_heads": 3,
                "head_dim": 128,
                "vocab_size": 151936,
                "sliding_window": 512,
                "layer_types": ["sliding_attention", "full_attention"] * 18,
            }
        )
    )
    kv = subprocess.run(
        [
            str(bindir / "specreg"),
            "check",
            str(ROOT / "examples" / "qwen3-8b-dflash"),
            "--verifier",
            str(tmp_path / "sliding"),
            "--no-weights",
            "--vllm",
            "0.33",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert kv.returncode == 0, kv.stderr
    assert "kv-cache-pages-padded" in kv.stdout and "vLLM 0.33 pads the KV page of verifier layers" in kv.stdout
    # the example plugin package (examples/specreg-example-plugin), installed from its folder beside the wheel
    plugin = subprocess.run(
        [str(py), "-m", "pip", "install", "-q", str(ROOT / "examples" / "specreg-example-plugin")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert plugin.returncode == 0, plugin.stderr[-3000:]
    listed = subprocess.run([str(bindir / "specreg"), "algorithms"], capture_output=True, text=True, env=env)
    assert listed.returncode == 0 and not listed.stderr, listed.stderr  # no broken plugin
    (row,) = [line.split() for line in listed.stdout.splitlines() if line.startswith("example_eagle3 ")]
    assert row == ["example_eagle3", "eagle3", "0.24", "specreg_example_plugin.example_eagle3"]
    draft = tmp_path / "in-house-draft"
    draft.mkdir()
    (draft / "config.json").write_text(json.dumps(example_plugin_config()))
    served = subprocess.run(
        [
            str(bindir / "specreg"),
            "serve",
            str(draft),
            "--config-only",
            "--dir",
            str(tmp_path / "served"),
            "--vllm",
            "0.33",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "HF_HUB_OFFLINE": "1"},
    )
    assert served.returncode == 0, served.stderr
    argv = json.loads(served.stdout)["argv"]
    sc = json.loads(argv[argv.index("--speculative-config") + 1])
    assert sc == {"method": "eagle3", "model": str(tmp_path / "served"), "num_speculative_tokens": 3}
    written = json.loads((tmp_path / "served" / "config.json").read_text())
    assert written["architectures"] == ["Eagle3Qwen3ForCausalLM"]
    assert (written["eagle_aux_hidden_state_layer_ids"], written["norm_before_residual"]) == ([2, 18, 33], False)
    shown = subprocess.run(
        [str(bindir / "specreg"), "show", str(draft), "--json"],
        capture_output=True,
        text=True,
        env={**env, "HF_HUB_OFFLINE": "1"},
    )
    codes = {f["code"] for f in json.loads(shown.stdout)["findings"]}
    assert shown.returncode == 0 and "example/full-draft-vocabulary" in codes, shown.stdout[-2000:]


def example_plugin_config() -> dict:
    """A draft in the example plugin's format (examples/specreg-example-plugin/README.md)."""
    return {
        "architectures": ["ExampleEagle3"],
        "speculators_model_type": "example_eagle3",
        "speculators_config": {
            "algorithm": "example_eagle3",
            "default_proposal_method": "greedy",
            "proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": 3}],
            "verifier": {"architectures": ["Qwen3ForCausalLM"], "name_or_path": "Qwen/Qwen3-8B"},
        },
        "transformer_layer_config": {
            "model_type": "qwen3",
            "hidden_size": 4096,
            "intermediate_size": 12288,
            "num_hidden_layers": 1,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "vocab_size": 151936,
            "rms_norm_eps": 1e-06,
            "max_position_embeddings": 40960,
        },
        "feature_layers": [2, 18, 33],
    }
