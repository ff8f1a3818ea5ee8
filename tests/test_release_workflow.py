"""The release workflow (.github/workflows/release.yml): on a version tag it builds, checks and
publishes with PyPI's trusted publishing. Its shape is checked here; its build job's own steps, every
one up to the publish, are run on a copy of this checkout under the `packaging` marker (a package
index and about a minute)."""

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / ".github" / "workflows" / "release.yml"
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def workflow():
    return yaml.safe_load(WORKFLOW.read_text())


def test_a_version_tag_starts_it_and_only_a_tag_publishes():
    doc = workflow()
    on = doc[True]  # YAML 1.1 reads the key `on` as a boolean
    assert on["push"] == {"tags": ["v*"]}
    publish = doc["jobs"]["publish"]
    assert publish["needs"] == "build" and publish["if"] == "startsWith(github.ref, 'refs/tags/v')"


def test_publishing_is_trusted_publishing_with_no_stored_token():
    publish = workflow()["jobs"]["publish"]
    assert publish["permissions"] == {"id-token": "write"} and publish["environment"]["name"] == "pypi"
    (step,) = [s for s in publish["steps"] if "pypa/gh-action-pypi-publish" in s.get("uses", "")]
    assert "with" not in step  # no password, no token: PyPI trusts this workflow's OIDC identity
    assert "secrets." not in WORKFLOW.read_text()
    assert workflow()["permissions"] == {"contents": "read"}  # the build job gets no id-token


def test_the_build_job_checks_the_files_it_hands_to_publish():
    runs = "\n".join(s.get("run", "") for s in workflow()["jobs"]["build"]["steps"])
    assert "python -m build --sdist --wheel --outdir dist ." in runs
    assert "twine check --strict dist/*" in runs and ".ci/release-check dist" in runs


def release_check(dist, tag):
    return subprocess.run(
        [sys.executable, str(ROOT / ".ci" / "release-check"), str(dist), tag], capture_output=True, text=True
    )


def test_release_check_refuses_a_tag_that_is_not_the_version(tmp_path):
    (tmp_path / f"specreg-{VERSION}-py3-none-any.whl").write_bytes(b"")
    (tmp_path / f"specreg-{VERSION}.tar.gz").write_bytes(b"")
    assert release_check(tmp_path, f"v{VERSION}").returncode == 0
    bad = release_check(tmp_path, "v99.0.0")
    assert bad.returncode == 1
    assert bad.stderr == f"release-check: the tag v99.0.0 is not the version {VERSION} of pyproject.toml\n"


def test_release_check_refuses_a_dist_folder_with_a_stale_wheel_beside(tmp_path):
    for name in (f"specreg-{VERSION}-py3-none-any.whl", "specreg-0.0.1-py3-none-any.whl", f"specreg-{VERSION}.tar.gz"):
        (tmp_path / name).write_bytes(b"")
    bad = release_check(tmp_path, "")
    assert bad.returncode == 1 and "specreg-0.0.1-py3-none-any.whl" in bad.stderr


@pytest.mark.packaging
def test_the_build_jobs_steps_run_to_the_publish_step(tmp_path):
    """Each `run:` step of the build job, as written, in a copy of the checkout's tracked files, on
    the tag of this version: build, twine check --strict, release-check, the wheel in a fresh venv."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    copy = tmp_path / "checkout"
    for name in files.decode().split("\0"):
        if name and (ROOT / name).is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            (copy / name).write_bytes((ROOT / name).read_bytes())
            os.chmod(copy / name, (ROOT / name).stat().st_mode)
    env = {**os.environ, "GITHUB_REF_NAME": f"v{VERSION}", "SPECREG_CACHE": str(tmp_path / "cache")}
    env.pop("PYTHONPATH", None)
    steps = [s for s in workflow()["jobs"]["build"]["steps"] if "run" in s]
    assert len(steps) == 3
    for step in steps:
        done = subprocess.run(
            ["bash", "-e", "-c", step["run"]], cwd=copy, env=env, capture_output=True, text=True, timeout=900
        )
        assert done.returncode == 0, (step["name"], done.stdout[-2000:], done.stderr[-2000:])
    assert sorted(p.name for p in (copy / "dist").iterdir()) == [
        f"specreg-{VERSION}-py3-none-any.whl",
        f"specreg-{VERSION}.tar.gz",
    ]
