"""`python tests/conformance/refresh_facts.py RELEASE WHEEL OUT`: every fact of one vLLM release, computed
from its wheel by the conformance tier's own harnesses and written as OUT/RELEASE/<kind>.json (what
`python -m specreg.facts refresh` runs, from the checkout's root). One progress line per step on stderr;
a failed step is one last line, exit 2.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from packaging.version import Version

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from specreg import facts
from tests.conformance import (
    kv_cache_groups,
    quantization_methods,
    rule_facts,
    selector,
    test_kv_cache_groups,
)
from tests.conformance.vllm_mapping import wheel as download


def step(text: str) -> None:
    print(f"refresh: {text}", file=sys.stderr, flush=True)


def main(release: str, wheel: str, out: Path) -> None:
    step(f"vllm=={wheel}: the wheel (downloaded once into {download.__globals__['CACHE']})")
    try:
        download(wheel)
    except subprocess.CalledProcessError as e:
        step(f"failed: could not download vllm=={wheel} (pip download exited {e.returncode}; its output is above)")
        sys.exit(2)
    if Version(release) < min(map(Version, facts.tested_by("selector"))):
        # releases older than the selector's range (0.20-0.23): their folder holds the rules only, and
        # the kv_cache survey cannot run there (those wheels' vllm.config needs gguf, which the engine
        # venv lacks), so the kv_cache rules' records say they are not computed
        step(
            "rules: each dated rule, decided as its held_by test decides it (the mapping, the masks, the "
            "source, ast; no kv_cache survey for a release older than the selector's range)"
        )
        rule_facts.regenerate({release: rule_facts.compute(wheel, None)}, root=out)
        return
    step("quantization_methods: get_quantization_config and its classes, read with ast")
    quantization_methods.regenerate({release: quantization_methods.methods(wheel)}, root=out)
    step(f"the engine venv ({selector.ENGINE_VENV}; .ci/engine-venv makes it when missing) and flashinfer")
    exe, env = selector.python()
    step("attention_backends: the wheel's attention selector, without FlashInfer's cubins")
    plain = selector.run(exe, env, release, False)
    step("attention_backends: the wheel's attention selector, with FlashInfer's cubins")
    cubins = selector.run(exe, env, release, True)
    selector.regenerate(
        {release: {"plain": plain, "cubins": cubins, "cubins_required": selector.requires_cubins(release)}}, root=out
    )
    step("kv_cache: the wheel's get_kv_cache_groups")
    groups = selector.run_script(exe, env, Path(kv_cache_groups.__file__), "KVGROUPS", release)
    test_kv_cache_groups.regenerate({release: groups}, root=out)
    step(
        "rules: each dated rule, decided as its held_by test decides it (the mapping, the masks, the "
        "source, ast, the kv_cache cases)"
    )
    rule_facts.regenerate({release: rule_facts.compute(wheel, groups["cases"])}, root=out)


if __name__ == "__main__":
    try:
        main(sys.argv[1], sys.argv[2], Path(sys.argv[3]))
    except subprocess.CalledProcessError as e:
        step(f"failed: {' '.join(map(str, e.cmd))} exited {e.returncode} (its output is above)")
        sys.exit(2)
    except Exception as e:  # noqa: BLE001  every failure is one line (a harness's assertion ends with its output's tail)
        last = str(e).strip().splitlines()[-1:] or [""]
        step(f"failed: {type(e).__name__}: {last[0]}")
        sys.exit(2)
