"""The first command against a bare interpreter (benchmarks/first_command.py), in the figures table."""

from __future__ import annotations

from conftest import record
from first_command import alternatives, measure


def test_first_command_ratio():
    for name, r in measure(15).items():
        record(
            f"specreg {name} / python -c pass",
            f"{r.wall:.2f}x ({r.command_ms:.0f} / {r.bare_ms:.0f} ms), CPU {r.cpu:.2f}x",
            "target 2.5x",
        )


def test_what_the_value_classes_cost_by_each_maker():
    for name, r in alternatives(15).items():
        record(
            f"{name} / python -c pass", f"{r.wall:.2f}x ({r.command_ms:.0f} / {r.bare_ms:.0f} ms), CPU {r.cpu:.2f}x", ""
        )
