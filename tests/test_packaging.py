"""What users install: the built wheel and sdist, in a fresh venv (not editable), with the smoke set."""

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
    run = subprocess.run([sys.executable, "-m", "build", "--sdist", "--wheel", "--outdir", str(out), str(ROOT)],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    (wheel,) = out.glob("specreg-*.whl")
    (sdist,) = out.glob("specreg-*.tar.gz")
    return wheel, sdist


def test_the_wheel_holds_every_module_and_the_catalog(built):
    wheel, _ = built
    names = set(zipfile.ZipFile(wheel).namelist())
    for path in ROOT.joinpath("specreg").rglob("*.py"):
        assert f"specreg/{path.relative_to(ROOT / 'specreg').as_posix()}" in names, path
    for path in ROOT.joinpath("algos").glob("*.py"):
        assert f"specreg/algos/{path.name}" in names
    tomls = list(ROOT.joinpath("registry").rglob("*.toml"))
    assert tomls and all(f"specreg/catalog_data/{p.relative_to(ROOT / 'registry').as_posix()}" in names for p in tomls)
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "[vllm.general_plugins]" in text and "specreg = specreg.vllm.plugin:register" in text


def test_the_wheel_installed_in_a_fresh_venv_passes_the_smoke_set(built, tmp_path):
    wheel, _ = built
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    install = subprocess.run([str(py), "-m", "pip", "install", "-q", f"{wheel}[verify]"], capture_output=True,
                             text=True, timeout=900)
    assert install.returncode == 0, install.stderr[-3000:]
    bindir = env_dir / "bin"
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}", "SPECREG_CACHE": str(tmp_path / "c")}
    env.pop("PYTHONPATH", None)
    smoke = [
        [str(bindir / "specreg"), "show", str(ROOT / "examples" / "qwen3-8b-dflash")],
        [str(bindir / "specreg"), "verify", "--help"],
        [str(bindir / "specreg"), "catalog", "list"],
        [str(bindir / "specreg"), "--version"],
        [str(py), "-c", "import specreg.verify, specreg.vllm.plugin, specreg, sys; "
                        "assert '/site-packages/' in specreg.__file__, specreg.__file__"],
    ]
    for argv in smoke:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
        assert out.returncode == 0, (argv, out.stdout[-1000:], out.stderr[-2000:])
    # writing commands never edit the installed package: refused before any request, nothing written
    catalog_dir = subprocess.run([str(py), "-c", "from specreg.entries import default_registry; print(default_registry())"],
                                 capture_output=True, text=True, env=env).stdout.strip()
    before = {p: p.read_bytes() for p in Path(catalog_dir).rglob("*.toml")}
    pin = subprocess.run([str(bindir / "specreg"), "catalog", "pin", "RedHatAI/Qwen3-8B-speculator.dflash"],
                         capture_output=True, text=True, timeout=120, env={**env, "HF_HUB_OFFLINE": "1"})
    assert pin.returncode == 2, pin.stderr
    assert "refusing to write into the catalog of the installed specreg package" in pin.stderr
    assert "--registry DIR" in pin.stderr and len(pin.stderr.strip().splitlines()) == 1
    assert {p: p.read_bytes() for p in Path(catalog_dir).rglob("*.toml")} == before


def test_the_sdist_holds_the_sources_the_wheel_is_built_from(built):
    import tarfile

    _, sdist = built
    names = {n.split("/", 1)[1] for n in tarfile.open(sdist).getnames() if "/" in n}
    for must in ("pyproject.toml", "specreg/verify/run.py", "algos/dflash.py", "registry/README.md", "README.md"):
        assert must in names, must


def test_the_declared_python_has_every_standard_module_specreg_imports():
    """pyproject said >=3.10 while specreg imports tomllib (3.11+): on 3.10 catalog, verify and show
    org/name ended in "internal error (ModuleNotFoundError: tomllib)". Read every import with ast."""
    import ast
    import re
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    declared = re.search(r'requires-python = ">=(\d+)\.(\d+)"', (root / "pyproject.toml").read_text())
    lowest = (int(declared[1]), int(declared[2]))
    #: standard modules that are newer than some Python this project might declare
    since = {"tomllib": (3, 11), "zoneinfo": (3, 9), "graphlib": (3, 9)}
    used = set()
    for path in [*root.joinpath("specreg").rglob("*.py"), *root.joinpath("algos").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                used |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                used.add(node.module.split(".")[0])
    needed = max((since[m] for m in used if m in since), default=(3, 0))
    assert lowest >= needed, f"requires-python >={lowest[0]}.{lowest[1]}, but specreg imports a module of {needed}"
    assert sys.version_info[:2] >= lowest
