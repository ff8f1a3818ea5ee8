"""`python tests/conformance/refresh_facts.py RELEASE WHEEL OUT`: every fact of one vLLM release, computed
from its wheel by the conformance tier's own harnesses and written as OUT/RELEASE/<kind>.json (what
`python -m specreg.facts refresh` runs, from the checkout's root).

Each extractor runs isolated, under a time limit (SPECREG_REFRESH_STEP_LIMIT seconds, default 1200): one
that fails or runs out of time is one `refresh: failed: STEP: ...` line on stderr and the others still
run. A failed kind of facts writes no file (the caller then writes nothing into the committed facts); a
failed rule is recorded in rules.json as not computed, with the failure as its why. Exit 0: every
extractor ran; 1: some failed (each is listed); 2: nothing could be computed (the wheel's download).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any


sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.conformance import (
    kv_cache_groups,
    quantization_methods,
    rule_facts,
    selector,
    test_kv_cache_groups,
)
from specreg.facts.refresh import rules_only
from tests.conformance.vllm_mapping import wheel as download

LIMIT = int(os.environ.get("SPECREG_REFRESH_STEP_LIMIT", "1200"))


def step(text: str) -> None:
    print(f"refresh: {text}", file=sys.stderr, flush=True)


class OutOfTime(Exception):
    pass


@contextlib.contextmanager
def limited(seconds: int) -> Iterator[None]:
    """Raise OutOfTime in the body after `seconds` (the main thread's interval timer)."""

    def expire(_signum, _frame):
        raise OutOfTime(f"ran past its limit of {seconds} s (SPECREG_REFRESH_STEP_LIMIT)")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def why(error: BaseException) -> str:
    """One line for a failed extractor: its type and the last line of its message."""
    if isinstance(error, subprocess.CalledProcessError):
        return f"{' '.join(map(str, error.cmd[:3]))} ... exited {error.returncode}"
    last = str(error).strip().splitlines()[-1:] or [""]
    return f"{type(error).__name__}: {last[0]}"


class Driver:
    """Runs each extractor isolated and remembers every failure."""

    def __init__(self, limit: int = LIMIT):
        self.limit = limit
        self.failures: list[str] = []

    def attempt(self, name: str, fn: Callable[[], Any]) -> tuple[bool, Any]:
        """(True, fn()) or (False, why it failed), the failure listed."""
        try:
            with limited(self.limit):
                return True, fn()
        except KeyboardInterrupt:
            raise
        except Exception as e:  # noqa: BLE001  any extractor's failure is recorded, and the others still run
            reason = why(e)
            self.failures.append(f"{name}: {reason}")
            step(f"failed: {name}: {reason}")
            return False, reason


def main(release: str, wheel: str, out: Path) -> int:
    step(f"vllm=={wheel}: the wheel (downloaded once into {download.__globals__['CACHE']})")
    try:
        download(wheel)
    except (subprocess.CalledProcessError, FileNotFoundError) as e:
        step(f"fatal: could not download the wheel of vllm=={wheel}: {why(e)}")
        return 2
    driver = Driver()
    if rules_only(release):
        # releases older than the selector's range (0.20-0.23): their folder holds the rules only, and
        # the kv_cache survey cannot run there (those wheels' vllm.config needs gguf, which the engine
        # venv lacks), so the kv_cache rules' records say they are not computed
        step(
            "rules: each dated rule, decided as its held_by test decides it (the mapping, the masks, the "
            "source, ast; no kv_cache survey for a release older than the selector's range)"
        )
        write_rules(release, wheel, None, driver, out)
        return 1 if driver.failures else 0
    step("quantization_methods: get_quantization_config and its classes, read with ast")
    ok, methods = driver.attempt("quantization_methods", lambda: quantization_methods.methods(wheel))
    if ok:
        quantization_methods.regenerate({release: methods}, root=out)
    step(f"the engine venv ({selector.ENGINE_VENV}; .ci/engine-venv makes it when missing) and flashinfer")
    ok, venv = driver.attempt("the engine venv", selector.python)
    groups: dict[str, Any] | None = None
    if ok:
        exe, env = venv
        step("attention_backends: the wheel's attention selector, without FlashInfer's cubins")
        plain_ok, plain = driver.attempt("attention_backends", lambda: selector.run(exe, env, release, False))
        step("attention_backends: the wheel's attention selector, with FlashInfer's cubins")
        cubins_ok, cubins = (
            driver.attempt("attention_backends (cubins)", lambda: selector.run(exe, env, release, True))
            if plain_ok
            else (False, None)
        )
        if plain_ok and cubins_ok:
            selector.regenerate(
                {release: {"plain": plain, "cubins": cubins, "cubins_required": selector.requires_cubins(release)}},
                root=out,
            )
        step("kv_cache: the wheel's get_kv_cache_groups")
        kv_script = Path(kv_cache_groups.__file__)
        kv_ok, found = driver.attempt("kv_cache", lambda: selector.run_script(exe, env, kv_script, "KVGROUPS", release))
        if kv_ok:
            groups = found
            test_kv_cache_groups.regenerate({release: groups}, root=out)
    step(
        "rules: each dated rule, decided as its held_by test decides it (the mapping, the masks, the "
        "source, ast, the kv_cache cases)"
    )
    write_rules(release, wheel, groups, driver, out)
    return 1 if driver.failures else 0


def write_rules(release: str, wheel: str, groups: dict[str, Any] | None, driver: Driver, out: Path) -> None:
    """rules.json: each rule decided isolated, the kv_cache rules not computed without the survey, and the
    algorithms the wheel registers but refuses, in its own words."""
    cases = groups["cases"] if groups is not None else None
    computed = rule_facts.compute(wheel, cases, driver.attempt)
    if groups is None and not rules_only(release):
        computed.update({r: rule_facts.NOT_RUN for r in rule_facts.KV_HOLDS})
    ok, refused = driver.attempt("refusals", lambda: rule_facts.refusals(wheel))
    rule_facts.regenerate({release: computed}, root=out, refused={release: refused if ok else {}})


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1], sys.argv[2], Path(sys.argv[3])))
    except KeyboardInterrupt:
        step("fatal: interrupted")
        sys.exit(130)
