"""specreg.verify.nightly: shards of the catalog, isolation of crashes and timeouts, resume, invalid entries."""

import json
import sys

import pytest

from specreg import entries
from specreg.verify import nightly
from verify_helpers import ENTRY, invalid_catalog


def test_shards_partition_the_catalog():
    every = list(entries.catalog().values())
    shards = [nightly.shard(every, i, 3) for i in (1, 2, 3)]
    ids = [e.id for s in shards for e in s]
    assert sorted(ids) == sorted(e.id for e in every) and len(ids) == len(set(ids))
    with pytest.raises(ValueError):
        nightly.parse_shard("4/3")


def test_all_isolates_crashes_and_timeouts_and_resumes(tmp_path):
    reg = tmp_path / "registry"
    (reg / "org").mkdir(parents=True)
    for name in ("ok", "crash", "slow"):
        (reg / "org" / f"{name}.toml").write_text(ENTRY.replace("org/draft", f"org/{name}"))
    calls = []

    def make(entry, out, history, extra):
        calls.append(entry.id)
        if entry.id == "org/crash":
            return [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"]
        if entry.id == "org/slow":
            return [sys.executable, "-c", "import time; time.sleep(30)"]
        code = (
            f"from specreg.verify import outputs; from pathlib import Path; outputs.write_result(Path({str(out)!r}), "
            f"{{'model': {entry.id!r}, 'verdict': 'pass'}})"
        )
        return [sys.executable, "-c", code]

    verdicts = nightly.run_all(tmp_path / "night", timeout=2, registry=str(reg), make_command=make, grace=0.5)
    assert verdicts == {"org/crash": "crash", "org/ok": "pass", "org/slow": "timeout"}
    crash = json.loads((tmp_path / "night" / "org--crash" / "result.json").read_text())
    assert "SIGKILL" in crash["error"]
    assert (tmp_path / "night" / "org--slow" / "junit.xml").exists()
    calls.clear()
    again = nightly.run_all(tmp_path / "night", timeout=2, registry=str(reg), make_command=make, resume=True, grace=0.5)
    assert calls == [] and again == verdicts


def test_all_measures_the_valid_entries_and_records_the_invalid_ones(tmp_path):
    """An invalid catalog entry refused the whole night (exit 2, nothing measured)."""
    reg = tmp_path / "registry"
    invalid_catalog(reg)
    calls = []

    def make(entry, out, history, extra):
        calls.append(entry.id)
        code = (
            f"from specreg.verify import outputs; from pathlib import Path; outputs.write_result(Path({str(out)!r}), "
            f"{{'model': {entry.id!r}, 'verdict': 'pass'}})"
        )
        return [sys.executable, "-c", code]

    verdicts = nightly.run_all(tmp_path / "night", timeout=30, registry=str(reg), make_command=make)
    assert calls == ["org/a", "org/b"]
    assert verdicts == {"org/a": "pass", "org/b": "pass", "org/broken": "invalid", "org/typed": "invalid"}
    typed = json.loads((tmp_path / "night" / "org--typed" / "result.json").read_text())
    assert (
        typed["verdict"] == "invalid" and "typed.toml: $.baselines[0].metrics.acceptance_length.value" in typed["error"]
    )
    broken = json.loads((tmp_path / "night" / "org--broken" / "result.json").read_text())
    assert broken["verdict"] == "invalid" and "broken.toml" in broken["error"]


def test_all_shards_the_invalid_entries_too(tmp_path):
    reg = tmp_path / "registry"
    invalid_catalog(reg)

    def make(entry, out, history, extra):
        code = (
            f"from specreg.verify import outputs; from pathlib import Path; outputs.write_result(Path({str(out)!r}), "
            f"{{'model': {entry.id!r}, 'verdict': 'pass'}})"
        )
        return [sys.executable, "-c", code]

    one = nightly.run_all(tmp_path / "1", shard_spec="1/2", registry=str(reg), make_command=make)
    two = nightly.run_all(tmp_path / "2", shard_spec="2/2", registry=str(reg), make_command=make)
    assert sorted([*one, *two]) == ["org/a", "org/b", "org/broken", "org/typed"]
