"""The first command's cost as a ratio to a bare interpreter: `specreg show DIR --json`, `check` and
`serve --config-only`, each against `python -c pass`, as the median of alternating pairs (one bare run,
then one command run, repeated), so that a busy machine slows both sides of a pair alike.

Run: .venv/bin/python benchmarks/first_command.py [--pairs N] [--floor | --alternatives]   (also from benchmarks/test_first_command.py)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import attrs

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "qwen3-8b-dflash" / "config.json"
sys.path.insert(0, str(ROOT / "tests"))
from cli_outputs import VERIFIER  # noqa: E402 - the Qwen/Qwen3-8B config the recorded answers check against


def commands(draft: Path, verifier: Path, out: Path) -> dict[str, list[str]]:
    """The commands measured, by name, as a user types them (the installed `specreg` script); check and
    serve read a local verifier config, so nothing is fetched."""
    script = Path(sys.executable).parent / "specreg"
    specreg = [str(script)] if script.exists() else [sys.executable, "-m", "specreg"]
    given = ["--verifier", str(verifier)]
    return {
        "show DIR --json": [*specreg, "show", str(draft), "--json"],
        "check DIR --no-weights": [*specreg, "check", str(draft), *given, "--no-weights"],
        "serve DIR --config-only": [
            *specreg,
            "serve",
            str(draft),
            *given,
            "--config-only",
            "--dir",
            str(out),
            "--force",
        ],
    }


def _seconds(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds: user + system) of one whole process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    r = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, timeout=300)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode not in (0, 1):  # 1: the draft has error findings, still a full run
        raise RuntimeError(f"{argv} exited {r.returncode}: {r.stderr.decode()[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu


@attrs.frozen
class Ratio:
    """One command against a bare interpreter: medians over the alternating pairs."""

    wall: float  # the median of the pairs' wall-time ratios: the figure the target is set on
    cpu: float  # the same for CPU time, which a busy machine disturbs less
    command_ms: float
    bare_ms: float


def paired_ratio(argv: list[str], pairs: int, env: dict[str, str]) -> Ratio:
    """The ratio of `argv` to `python -c pass` over `pairs` alternating pairs, after one warm-up of each
    (which writes the .pyc files an installed package has)."""
    bare = [sys.executable, "-c", "pass"]
    _seconds(bare, env), _seconds(argv, env)
    wall, cpu, ours, theirs = [], [], [], []
    for _ in range(pairs):
        b_wall, b_cpu = _seconds(bare, env)
        c_wall, c_cpu = _seconds(argv, env)
        wall.append(c_wall / b_wall)
        cpu.append(c_cpu / b_cpu)
        ours.append(c_wall)
        theirs.append(b_wall)
    median = statistics.median
    return Ratio(median(wall), median(cpu), median(ours) * 1000, median(theirs) * 1000)


#: run in a child as `python -c FLOOR_PROBE ARGV...`: the command in-process, then what it left loaded
FLOOR_PROBE = """
import contextlib, io, json, sys
import attrs
from specreg.cli.main import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    try:
        main(sys.argv[1:])
    except SystemExit:
        pass
ours = [m for m in list(sys.modules) if m.split(".")[0] in ("specreg", "algos")]
classes = {id(c): len(attrs.fields(c)) for m in ours for c in vars(sys.modules[m]).values()
           if isinstance(c, type) and attrs.has(c) and c.__module__ == m}
print(json.dumps({"modules": sorted(m for m in sys.modules if m not in ours and m != "__main__"),
                  "fields": sorted(classes.values())}))
"""

#: the floor's process: import the modules the command ended with, then make as many frozen attrs classes
#: with as many fields (attrs writes and compiles each class's methods): everything but specreg's own code
FLOOR = """
import importlib, json, sys
import attrs
plan = json.loads(sys.argv[1])
for name in plan["modules"]:
    try:
        importlib.import_module(name)
    except Exception:
        pass
for i, n in enumerate(plan["fields"]):
    attrs.frozen(type(f"C{i}", (), {"__annotations__": {f"f{j}": "int" for j in range(n)}}))
"""


def floor_argv(argv: list[str], env: dict[str, str]) -> tuple[list[str], int]:
    """The floor of `argv` (a `specreg ...` command): a process that loads the same libraries and builds
    the same number of attrs classes, and runs no specreg code; with the number of classes."""
    words = argv[
        argv.index("show") if "show" in argv else next(i for i, w in enumerate(argv) if w in ("check", "serve")) :
    ]
    r = subprocess.run(
        [sys.executable, "-c", FLOOR_PROBE, *words], capture_output=True, text=True, env=env, timeout=300
    )
    if r.returncode != 0:
        raise RuntimeError(f"the floor probe of {words} failed: {r.stderr[-2000:]}")
    plan = r.stdout.strip().splitlines()[-1]
    return [sys.executable, "-c", FLOOR, plan], len(json.loads(plan)["fields"])


def child_env() -> dict[str, str]:
    """The environment the measured processes run in: ours, but writing .pyc files (an installed package
    has them, so a run that may not write them would measure compiling)."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def measure(pairs: int = 15, floor: bool = False) -> dict[str, Ratio]:
    """name -> its Ratio for each command, on a copy of the shipped example draft; with `floor`, each
    command's floor too (`floor_argv`), named "floor of NAME (N attrs classes)"."""
    env = child_env()
    with tempfile.TemporaryDirectory() as tmp:
        draft, verifier = Path(tmp) / "draft", Path(tmp) / "verifier"
        draft.mkdir()
        verifier.mkdir()
        shutil.copy(EXAMPLE, draft / "config.json")
        (verifier / "config.json").write_text(json.dumps(VERIFIER))
        env["SPECREG_CACHE"] = str(Path(tmp) / "cache")
        env["HF_HUB_OFFLINE"] = "1"
        argvs = commands(draft, verifier, Path(tmp) / "out")
        out = {}
        for name, argv in argvs.items():
            out[name] = paired_ratio(argv, pairs, env)
            if floor:
                probe, n = floor_argv(argv, env)
                out[f"floor of {name} ({n} attrs classes)"] = paired_ratio(probe, pairs, env)
        return out


#: --alternatives: what `show`'s 19 value classes (5 fields each) cost, built by attrs as today and by the two
#: stdlib makers of frozen value classes, each with its library's import: the data for the team's choice
ALTERNATIVES = {
    "attrs.frozen": "import attrs\nmake = attrs.frozen",
    "dataclass(frozen=True, slots=True)": "import dataclasses\nmake = dataclasses.dataclass(frozen=True, slots=True)",
    "typing.NamedTuple": "import typing\nmake = lambda c: typing.NamedTuple(c.__name__, list(c.__annotations__.items()))",
}
CLASSES = """
for i in range(19):
    make(type(f"C{i}", (), {"__annotations__": {f"f{j}": int for j in range(5)}}))
"""


def alternatives(pairs: int) -> dict[str, Ratio]:
    """maker -> the Ratio of a process that imports it and makes 19 classes of 5 fields."""
    env = child_env()
    return {
        f"19 classes by {name}": paired_ratio([sys.executable, "-c", head + CLASSES], pairs, env)
        for name, head in ALTERNATIVES.items()
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pairs", type=int, default=15, help="alternating pairs per command (default 15)")
    p.add_argument(
        "--floor",
        action="store_true",
        help="also measure each command's floor: its libraries and attrs classes without specreg's code",
    )
    p.add_argument(
        "--alternatives",
        action="store_true",
        help="measure instead what 19 value classes cost by attrs, dataclasses and typing.NamedTuple",
    )
    args = p.parse_args(argv)
    if args.alternatives:
        rows = alternatives(args.pairs)
    else:
        rows = {(n if n.startswith("floor") else f"specreg {n}"): r for n, r in measure(args.pairs, args.floor).items()}
    for label, r in rows.items():
        print(
            f"{label:<56} {r.wall:.2f}x a bare interpreter ({r.command_ms:.0f} ms against "
            f"{r.bare_ms:.0f} ms; CPU time {r.cpu:.2f}x)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
