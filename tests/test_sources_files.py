"""specreg/sources/files.py: every reader meets every file-system shape with a clear outcome."""

from __future__ import annotations

import json
import os

import pytest

import specreg
from conftest import fixture_config
from hostile_helpers import MINIMAL

# -- every reader, every file-system shape ---------------------------------------------------------------------

SHAPES = ["regular", "empty", "link inside", "link outside", "dangling link", "link loop", "fifo", "directory"]


def make_shape(root, name: str, shape: str, content: bytes) -> None:
    """`root/name` as `shape`; "link outside" points at a file of the same content outside `root`."""
    path = root / name
    if shape == "regular":
        path.write_bytes(content)
    elif shape == "empty":
        path.write_bytes(b"")
    elif shape == "link inside":
        (root / f"real-{name}").write_bytes(content)
        path.symlink_to(f"real-{name}")
    elif shape == "link outside":
        outside = root.parent.parent / f"outside-{name}"
        outside.write_bytes(content)
        path.symlink_to(outside)
    elif shape == "dangling link":
        path.symlink_to(root / "gone")
    elif shape == "link loop":
        path.symlink_to(path)
    elif shape == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()


def readers():
    """(name, file name, content, read(root) -> None): each reader of a user- or remote-supplied file."""
    from specreg.entries.lookup import read_catalog
    from specreg.sources.files import read_source
    from specreg.verify.report import _results
    from specreg.vllm.draft_weights import local_weight_files
    from weights import safetensors_bytes, tensors

    config = json.dumps(fixture_config("dflash")).encode()
    entry = MINIMAL.format(id="org/x").encode()

    def config_reader(root):
        read_source(str(root / "config.json"))

    def weights_reader(root):
        local_weight_files(root)

    def catalog_reader(root):
        _, problems = read_catalog(root.parent)  # problems are collected, not raised
        if problems:
            raise ValueError(problems[0][1].message)

    def report_reader(root):
        warnings: list[str] = []
        _results(root, warnings)  # a file it will not read is a warning on the page
        if warnings:
            raise ValueError(warnings[0])

    return [
        ("config", "config.json", config, config_reader),
        ("weights", "model.safetensors", safetensors_bytes(tensors(fc__weight=(2, 2))), weights_reader),
        ("catalog entry", "x.toml", entry, catalog_reader),
        ("result", "result.json", b'{"model": "org/x", "verdict": "pass"}', report_reader),
    ]


@pytest.mark.parametrize("reader", [r[0] for r in readers()])
@pytest.mark.parametrize("shape", SHAPES)
def test_every_reader_meets_every_file_shape_with_a_clear_outcome(tmp_path, reader, shape):
    """Each reader of an untrusted file either reads a regular file (or a link to one inside its root)
    or refuses with specreg's error: never another exception, never a read of what a link points to
    outside the root, never a hang on a FIFO (the test would time out)."""
    name, filename, content, read = next(r for r in readers() if r[0] == reader)
    root = tmp_path / "top" / "org"
    root.mkdir(parents=True)
    make_shape(root, filename, shape, content)
    try:
        read(root)
        outcome = "read"
    except (specreg.SpecregError, ValueError) as exc:
        outcome = f"refused: {exc}"
    if shape == "link outside" and reader in ("weights", "catalog entry", "result"):
        # a file beside the source, in the catalog or in a results tree; the config itself is the
        # path the user named, so a link there is theirs to follow
        assert outcome.startswith("refused"), outcome
    if shape in ("fifo", "directory", "dangling link", "link loop") and reader in ("config", "weights"):
        assert outcome.startswith("refused"), outcome
