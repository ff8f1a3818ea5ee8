import copy
import json
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"


def fixture_config(name: str) -> dict:
    """A fresh copy of a fixture config (speculators/NAME.json)."""
    return json.loads((DATA / "speculators" / f"{name}.json").read_text())


@pytest.fixture
def fx():
    return fixture_config


@pytest.fixture
def variant():
    """variant(name, **changes): a fixture with dotted-path changes; a value of DROP removes the key."""

    def make(name, **changes):
        cfg = fixture_config(name)
        for dotted, value in changes.items():
            node = cfg
            parts = dotted.split("__")
            for p in parts[:-1]:
                node = node[int(p)] if isinstance(node, list) else node[p]
            last = parts[-1]
            if value is DROP:
                del node[last]
            else:
                node[last] = copy.deepcopy(value)
        return cfg

    return make


class _Drop:
    def __repr__(self):
        return "DROP"


DROP = _Drop()


def codes(spec):
    """The finding codes of a Speculator, in order."""
    return [f.code for f in spec.findings]


def finding(spec, code):
    """The one finding with `code`."""
    (f,) = [f for f in spec.findings if f.code == code]
    return f
