"""Pre-flight checks: a failing and a passing case for every check, locally and through the
loopback Hub (headers by range requests only)."""

import json
import os
import subprocess
import sys

import pytest

import specreg
from conftest import serving_release
from conftest import DATA, fixture_config
import tiny
from specreg.normalization.findings import CODES
from specreg.vllm.preflight import preflight
from weights import write_draft

PREFLIGHT_CODES = {
    "verifier-layer-out-of-range",
    "verifier-hidden-size-mismatch",
    "verifier-vocab-too-small",
    "draft-vocab-reduced",
    "verifier-vocab-mismatch",
    "mask-token-out-of-vocab",
    "verifier-no-aux-capture",
    "draft-tp-invalid",
    "weights-fc-shape",
    "weights-vocab-map-missing",
    "weights-vocab-map-unexpected",
    "weights-vocab-map-shape",
    "weights-lm-head-rows",
    "weights-lm-head-missing",
    "weights-embed-missing",
    "weights-mask-hidden",
    "weights-dspark-heads",
    "weights-layer-count",
    "weights-unavailable",
    "verifier-rope-mismatch",
    "verifier-head-dim-mismatch",
    "verifier-no-layer-zero-capture",
    "speculative-tokens-beyond-draft",
    "speculative-tokens-untrained",
}


def no_layer_zero_architecture() -> str:
    """An architecture whose class captures aux states but not the one entering its first layer in the
    newest known release (aux_capture.json, read from the wheels)."""
    table = json.loads((specreg.facts.FOLDER / "aux_capture.json").read_text())

    def now(runs):
        return any(last is None for _first, last in runs)

    zero = {a for a, runs in table["layer_zero"].items() if now(runs)}
    return next(a for a, runs in sorted(table["architectures"].items()) if now(runs) and a not in zero)


def run(*args):
    return subprocess.run(
        [sys.executable, "-m", "specreg", *args], capture_output=True, text=True, timeout=60, env=dict(os.environ)
    )


def drop(d, key):
    d = dict(d)
    del d[key]
    return d


def reshape(d, key, shape, dtype=None):
    d = dict(d)
    d[key] = (shape, dtype or d[key][1])
    return d


# (code, algorithm, how to break the pair: changes to (config, verifier, weights), extra args)
BREAKS = {
    "verifier-layer-out-of-range": ("eagle3", lambda c, v, w: v.update(num_hidden_layers=4), {}),
    "verifier-hidden-size-mismatch": ("dflash", lambda c, v, w: v.update(hidden_size=16), {}),
    "verifier-vocab-too-small": ("dflash", lambda c, v, w: c.update(draft_vocab_size=128), {}),
    "verifier-vocab-mismatch": ("dflash", lambda c, v, w: v.update(vocab_size=128), {}),
    "mask-token-out-of-vocab": ("dflash", lambda c, v, w: c.update(mask_token_id=64), {}),
    "verifier-no-aux-capture": ("dflash", lambda c, v, w: v.update(architectures=["GPT2LMHeadModel"]), {}),
    "draft-tp-invalid": ("dflash", None, {"tensor_parallel_size": 4, "draft_tensor_parallel_size": 2}),
    "weights-fc-shape": ("eagle3", lambda c, v, w: w.update(reshape(w, "fc.weight", (8, 16))), {}),
    "weights-vocab-map-missing": ("eagle3", lambda c, v, w: w.pop("d2t"), {}),
    "weights-vocab-map-unexpected": ("dflash", lambda c, v, w: w.update({"d2t": ((64,), "int64")}), {}),
    "weights-vocab-map-shape": ("eagle3", lambda c, v, w: w.update(reshape(w, "d2t", (32,), "int32")), {}),
    "weights-lm-head-rows": ("eagle3", lambda c, v, w: w.update(reshape(w, "lm_head.weight", (16, 8))), {}),
    "weights-lm-head-missing": (
        "dspark",
        lambda c, v, w: (
            c.update(draft_vocab_size=32),
            w.update({"d2t": ((32,), "int64"), "t2d": ((tiny.VOCAB,), "bool")}),
            w.update(reshape(w, "markov_head.markov_w1.weight", (32, 4))),
            w.update(reshape(w, "markov_head.markov_w2.weight", (32, 4))),
        ),
        {},
    ),
    "weights-embed-missing": ("dspark", lambda c, v, w: v.update(vocab_size=tiny.VOCAB // 2), {}),
    "weights-mask-hidden": ("peagle", lambda c, v, w: w.pop("mask_hidden"), {}),
    "weights-dspark-heads": (
        "dspark",
        lambda c, v, w: w.update(reshape(w, "markov_head.markov_w1.weight", (64, 3))),
        {},
    ),
    "weights-layer-count": ("dflash", lambda c, v, w: [w.pop(k) for k in list(w) if k.startswith("layers.4.")], {}),
    "weights-unavailable": ("dflash", "no-weights", {}),
    # the draft's rope_parameters.rope_theta is 1000000 (tiny.draft_config)
    "verifier-rope-mismatch": ("dflash", lambda c, v, w: v.update(rope_theta=10000.0), {}),
    "verifier-head-dim-mismatch": ("dflash", lambda c, v, w: v.update(head_dim=4), {}),
    "verifier-no-layer-zero-capture": (
        "dflash",
        lambda c, v, w: (
            c.update(aux_hidden_state_layer_ids=[0, 1, 2, 3, 4]),
            v.update(architectures=[no_layer_zero_architecture()]),
        ),
        {},
    ),
    # block_size 16: the draft produces 15 tokens a step; Eagle-3 was trained for 3
    "speculative-tokens-beyond-draft": ("dflash", None, {"num_speculative_tokens": 16}),
    "speculative-tokens-untrained": ("eagle3", None, {"num_speculative_tokens": 4}),
}


def pair(tmp_path, algo, change=None):
    c, v, w = tiny.draft_config(algo), tiny.verifier_config(algo), tiny.weights(algo)
    if callable(change):
        change(c, v, w)
    draft, ver = tiny.write_pair(tmp_path, algo, config=c, verifier=v, tensors=False if change == "no-weights" else w)
    if change == "no-weights":
        (draft / "pytorch_model.bin").write_bytes(b"not checked")
    return draft, ver


def checked(draft, ver, **kw):
    return preflight(specreg.load(draft), verifier=str(ver), **kw)


def test_every_preflight_code_is_documented_and_tested():
    assert PREFLIGHT_CODES <= set(CODES)
    assert set(BREAKS) | {"draft-vocab-reduced"} == PREFLIGHT_CODES


@pytest.mark.parametrize("code", sorted(BREAKS))
def test_each_check_fails_on_its_broken_pair(tmp_path, code):
    algo, change, kw = BREAKS[code]
    spec = checked(*pair(tmp_path, algo, change), **kw)
    found = [f for f in spec.findings if f.code == code]
    assert found, [f.code for f in spec.findings]
    assert found[0].severity == CODES[code].severity
    if CODES[code].severity == "error":
        assert not spec.servable


@pytest.mark.parametrize("code", sorted(BREAKS))
def test_each_check_passes_on_the_consistent_pair(tmp_path, code):
    algo, _change, _kw = BREAKS[code]
    kw = {"tensor_parallel_size": 4, "draft_tensor_parallel_size": 4} if code == "draft-tp-invalid" else {}
    spec = checked(*pair(tmp_path, algo), **kw)
    assert code not in {f.code for f in spec.findings}


@pytest.mark.parametrize("algo", ["eagle3", "peagle", "dflash", "dspark"])
def test_a_clean_pair_has_no_preflight_findings(tmp_path, algo):
    draft, ver = pair(tmp_path, algo)
    spec = preflight(specreg.load(draft, vllm=serving_release(algo)), verifier=str(ver))
    codes = {f.code for f in spec.findings} & PREFLIGHT_CODES
    # a reduced vocabulary is stated (info), and its d2t/t2d are then present and well-formed
    assert codes == ({"draft-vocab-reduced"} if algo in ("eagle3", "peagle") else set())
    assert not spec.errors
    w = spec.checks.weights
    assert w.files == ("model.safetensors",) and w.tensors == len(tiny.weights(algo))
    assert w.parameters == sum(__import__("math").prod(shape) for shape, _ in tiny.weights(algo).values())
    assert spec.checks.verifier.num_hidden_layers == tiny.LAYERS_VERIFIER


def test_aux_id_l_is_valid_from_vllm_018_and_not_before(tmp_path):
    c = tiny.draft_config("eagle3")
    c["eagle_aux_hidden_state_layer_ids"] = [1, 3, 6]  # 6 = the verifier's num_hidden_layers
    draft, ver = tiny.write_pair(tmp_path, "eagle3", config=c)
    new = preflight(specreg.load(draft, vllm="0.18"), verifier=str(ver), check_weights=False)
    old = preflight(specreg.load(draft, vllm="0.17"), verifier=str(ver), check_weights=False)
    assert "verifier-layer-out-of-range" not in [f.code for f in new.findings]
    assert "verifier-layer-out-of-range" in [f.code for f in old.findings]


def test_a_multimodal_verifier_is_read_through_its_text_config(tmp_path):
    v = {
        "architectures": ["Qwen3VLMoeForConditionalGeneration"],
        "vocab_size": 64,
        "text_config": {"hidden_size": 8, "num_hidden_layers": 6, "vocab_size": 64},
    }
    spec = checked(*pair(tmp_path, "dflash", lambda c, vv, w: (vv.clear(), vv.update(v))))
    assert spec.checks.verifier.text_config and spec.checks.verifier.hidden_size == 8
    assert not {f.code for f in spec.findings} & PREFLIGHT_CODES


def test_load_runs_the_checks_and_to_dict_reports_them(tmp_path):
    draft, ver = pair(tmp_path, "eagle3", lambda c, v, w: w.pop("d2t"))
    spec = specreg.load(draft, check_verifier=True, check_weights=True, verifier=str(ver))
    d = spec.to_dict()
    assert d["checks"]["weights"]["dtypes"] == {"BOOL": 64, "F16": d["checks"]["weights"]["parameters"] - 64}
    f = next(f for f in d["findings"] if f["code"] == "weights-vocab-map-missing")
    assert f["fix"].startswith("save the draft with its d2t/t2d")


# -- the command line ----------------------------------------------------------------------------


def test_check_exits_0_on_a_consistent_pair_and_prints_a_table(tmp_path):
    draft, ver = pair(tmp_path, "dspark")
    r = run("check", str(draft), "--verifier", str(ver))
    assert r.returncode == 0, r.stderr
    assert f"verifier  {ver}: Qwen3ForCausalLM, 6 layers, hidden 8, vocab 64" in r.stdout
    assert "weights   1 file, 12 tensors, 1,429 parameters (F16 1,429); 1,032 header bytes read" in r.stdout
    assert r.stdout.rstrip().endswith("ok: no errors")


def test_an_empty_verifier_name_is_a_warning_and_verifier_fills_it(tmp_path):
    # a real checkpoint leaves speculators_config.verifier.name_or_path "" and names the verifier on the
    # command line: the draft alone is checked, with a warning; --verifier checks the pair
    draft, ver = pair(tmp_path, "eagle3", lambda c, v, w: c["speculators_config"]["verifier"].update(name_or_path=""))
    r = run("check", str(draft), "--json")
    assert r.returncode == 0, r.stderr
    found = {f["code"]: f for f in json.loads(r.stdout)["findings"]}
    assert found["verifier-missing"]["severity"] == "warning"
    assert "empty string" in found["verifier-missing"]["message"]
    r = run("check", str(draft), "--verifier", str(ver), "--json")
    assert r.returncode == 0, r.stderr
    assert "verifier-missing" not in [f["code"] for f in json.loads(r.stdout)["findings"]]
    assert json.loads(r.stdout)["checks"]["verifier"]["id"] == str(ver)


def test_check_exits_1_with_the_finding_and_its_fix(tmp_path):
    draft, ver = pair(tmp_path, "eagle3", lambda c, v, w: w.update(reshape(w, "fc.weight", (8, 16))))
    r = run("check", str(draft), "--verifier", str(ver))
    assert r.returncode == 1
    assert "error    weights-fc-shape" in r.stdout
    assert "fix: the number of aux layer ids" in r.stdout
    r = run("check", str(draft), "--verifier", str(ver), "--json")
    assert r.returncode == 1
    assert "weights-fc-shape" in [f["code"] for f in json.loads(r.stdout)["findings"]]


def test_check_of_a_missing_local_verifier_is_bad_input(tmp_path):
    draft, _ = pair(tmp_path, "dflash")
    r = run("check", str(draft), "--verifier", str(tmp_path / "nope"))
    assert r.returncode == 2
    assert r.stderr.strip() == f"error: {tmp_path / 'nope'}: verifier: no such file or directory"


# -- through the loopback Hub: header ranges only -------------------------------------------------


def test_hub_check_reads_only_header_ranges_of_weight_files(hub, tmp_path):
    files = tiny.safetensors_files(tiny.weights("dflash"), shards=2)
    sizes = {name: len(data) for name, data in files.items() if name.endswith(".safetensors")}
    hub.add("org/draft", {"config.json": json.dumps(tiny.draft_config("dflash")).encode(), **files})
    hub.add("org/verifier", {"config.json": json.dumps(tiny.verifier_config("dflash")).encode()})
    spec = specreg.load("org/draft", check_verifier=True, check_weights=True, verifier="org/verifier")
    assert not spec.errors and not {f.code for f in spec.findings} & PREFLIGHT_CODES
    assert spec.checks.weights.files == tuple(sorted(sizes))
    weight_gets = [(m, p, rng, n) for m, p, rng, n in hub.transfers if p.endswith(".safetensors") and m == "GET"]
    assert weight_gets and all(rng and rng.startswith("bytes=") for _, _, rng, _ in weight_gets)
    # each file was read up to its header (the tiny files are smaller than the first range)
    for name, size in sizes.items():
        sent = hub.bytes_sent(name)
        assert 0 < sent <= size
    print(
        f"\nbytes transferred by the check: {sum(n for *_, n in hub.transfers)} "
        f"(weights {sum(hub.bytes_sent(n) for n in sizes)} of {sum(sizes.values())})"
    )


def test_hub_check_of_a_large_file_never_downloads_it_whole(hub):
    # a 2 MB weight file: the header range is all that may cross the wire
    w = tiny.weights("dflash")
    w["big.padding"] = ((1024 * 1024,), "float16")
    files = tiny.safetensors_files(w)
    size = len(files["model.safetensors"])
    hub.add("org/draft", {"config.json": json.dumps(tiny.draft_config("dflash")).encode(), **files})
    hub.add("org/verifier", {"config.json": json.dumps(tiny.verifier_config("dflash")).encode()})
    spec = specreg.load("org/draft", check_verifier=True, check_weights=True, verifier="org/verifier")
    assert spec.checks.weights.parameters > 1024 * 1024
    sent = hub.bytes_sent("model.safetensors")
    assert sent <= 100_001 < size
    print(f"\nweights: {sent} bytes of {size} read for the header")


def test_hub_check_flags_a_broken_pair(hub):
    w = tiny.weights("eagle3")
    del w["d2t"]
    hub.add("org/draft", {"config.json": json.dumps(tiny.draft_config("eagle3")).encode(), **tiny.safetensors_files(w)})
    hub.add("org/verifier", {"config.json": json.dumps(tiny.verifier_config("eagle3")).encode()})
    r = run("check", "org/draft", "--verifier", "org/verifier")
    assert r.returncode == 1
    assert "weights-vocab-map-missing" in r.stdout


@pytest.mark.parametrize("named", ["/dev/stdin", "/etc/hostname", "../../etc", "~/.ssh/config"])
def test_a_hub_config_never_makes_specreg_read_a_local_path(hub, named):
    cfg = fixture_config("dflash")
    cfg["speculators_config"]["verifier"]["name_or_path"] = named
    hub.add("org/hostile", {"config.json": json.dumps(cfg).encode()})
    with pytest.raises(specreg.ConfigError, match="reads no local path a remote file names") as err:
        specreg.load("org/hostile", check_verifier=True, check_weights=False)
    assert err.value.path == "$.speculators_config.verifier.name_or_path"


def test_a_hub_config_naming_a_relative_name_that_exists_locally_still_reads_the_hub(hub, tmp_path, monkeypatch):
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "config.json").write_text('{"planted": true}')
    monkeypatch.chdir(tmp_path)
    cfg = fixture_config("dflash")
    cfg["speculators_config"]["verifier"]["name_or_path"] = "etc"
    hub.add("org/hostile", {"config.json": json.dumps(cfg).encode()})
    with pytest.raises(specreg.SpecregError, match="no repository etc on the Hub"):
        specreg.load("org/hostile", check_verifier=True, check_weights=False)


# -- every number retyped -------------------------------------------------------------------------
# Every number of a real draft config retyped, one field at a time, through the whole of `check`
# (normalize, the verifier, the weight headers, the GPU's attention selector): the result is a
# Speculator or a ConfigError naming JSON paths, never another exception. A hidden size that was an
# object once reached the weight check and ended in `TypeError: mappingproxy * int` (exit 3).

FIXTURES = sorted(f"speculators/{p.name}" for p in (DATA / "speculators").glob("*.json")) + sorted(
    f"native/{p.name}" for p in (DATA / "native").glob("*.json")
)


#: a non-empty object: an empty one is falsy, and slipped past the check that crashed on the other
RETYPES = {"an object": {"x": 1}, "a list": [1], "a string": "1", "a bool": True, "null": None}


VERIFIER = {
    "architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3",
    "hidden_size": 4096,
    "num_hidden_layers": 36,
    "vocab_size": 151936,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
}


GPU = "H100"


def numbers(value, path=()):
    """The path of every int or float in a JSON value (booleans are not numbers here)."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from numbers(v, path + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from numbers(v, path + (i,))
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield path


def retyped(cfg: dict, path: tuple, value) -> dict:
    out = json.loads(json.dumps(cfg))
    node = out
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return out


def check(directory, verifier, gpu):
    spec = specreg.load(str(directory), verifier=str(verifier))
    return preflight(spec, verifier=str(verifier), check_weights=True, gpu=gpu)


def gpu_for(draft, verifier) -> str | None:
    """The GPU check runs where the unchanged fixture passes it (some drafts give no head size)."""
    try:
        check(draft, verifier, GPU)
    except specreg.SpecregError:
        return None
    return GPU


def test_the_retypes_reach_every_stage():
    cfg = json.loads((DATA / "speculators" / "eagle3_generated.json").read_text())
    assert ("transformer_layer_config", "hidden_size") in set(numbers(cfg))
    assert ("speculators_config", "proposal_methods", 0, "speculative_tokens") in set(numbers(cfg))


@pytest.mark.parametrize("fixture", FIXTURES)
def test_every_number_retyped_is_a_speculator_or_a_config_error_naming_a_path(tmp_path, fixture):
    base = json.loads((DATA / fixture).read_text())
    verifier = tmp_path / "verifier"
    verifier.mkdir()
    (verifier / "config.json").write_text(json.dumps(VERIFIER))
    draft = write_draft(tmp_path / "draft", base)
    gpu = gpu_for(draft, verifier)
    wrong = []
    for path in numbers(base):
        for what, value in RETYPES.items():
            (draft / "config.json").write_text(json.dumps(retyped(base, path, value)))
            try:
                check(draft, verifier, gpu)
            except specreg.ConfigError as exc:
                if not all(p.path.startswith("$") for p in exc.problems):
                    wrong.append((path, what, [p.path for p in exc.problems]))
            except Exception as exc:  # noqa: BLE001 - the point: any other exception is a bug
                wrong.append((path, what, f"{type(exc).__name__}: {exc}"))
    assert wrong == []


@pytest.mark.parametrize(
    "fixture, at",
    [
        ("speculators/eagle3_generated.json", ("transformer_layer_config",)),
        ("native/zlab_dflash_qwen3_8b_fixture.json", ()),
    ],
)
@pytest.mark.parametrize("what", ["an object", "a list", "a string", "a bool"])
def test_a_hidden_size_that_is_no_integer_is_a_config_error_at_its_path(tmp_path, fixture, at, what):
    cfg = retyped(json.loads((DATA / fixture).read_text()), (*at, "hidden_size"), RETYPES[what])
    (tmp_path / "verifier").mkdir()
    (tmp_path / "verifier" / "config.json").write_text(json.dumps(VERIFIER))
    draft = write_draft(tmp_path / "draft", cfg)
    with pytest.raises(specreg.ConfigError) as caught:
        check(draft, tmp_path / "verifier", None)
    path = "$." + ".".join((*at, "hidden_size"))
    assert [p.path for p in caught.value.problems] == [path]
    assert caught.value.problems[0].message.startswith("expected an integer, got ")


@pytest.mark.parametrize("what", ["an object", "a list", "a string", "a bool"])
def test_a_head_count_that_is_no_integer_stops_the_gpu_check_at_its_path(tmp_path, what):
    """num_attention_heads wrong is an error finding; the GPU's head size (hidden_size // heads) is then
    unknown (or, for true, 5120), so --gpu says which field, not 'gives neither head_dim nor ...'."""
    cfg = retyped(
        json.loads((DATA / "native" / "specforge_qwq_32b_eagle3.json").read_text()),
        ("num_attention_heads",),
        RETYPES[what],
    )
    (tmp_path / "verifier").mkdir()
    (tmp_path / "verifier" / "config.json").write_text(json.dumps(VERIFIER))
    draft = write_draft(tmp_path / "draft", cfg)
    assert "invalid-draft-shape" in [f.code for f in check(draft, tmp_path / "verifier", None).errors]
    with pytest.raises(specreg.ConfigError) as caught:
        check(draft, tmp_path / "verifier", GPU)
    assert [p.path for p in caught.value.problems] == ["$.num_attention_heads"]
    assert caught.value.problems[0].message.startswith(f"--gpu {GPU}: expected a positive integer")


def _aux_runs():
    return json.loads((specreg.facts.FOLDER / "aux_capture.json").read_text())["architectures"]


def _no_aux_capture(tmp_path, architecture, vllm):
    draft, ver = pair(tmp_path, "eagle3", lambda c, v, w: v.update(architectures=[architecture]))
    spec = preflight(specreg.load(draft, vllm=vllm), verifier=str(ver))
    return [f.message for f in spec.findings if f.code == "verifier-no-aux-capture"]


def test_aux_capture_is_read_for_the_target_release(tmp_path):
    """An architecture whose class gained SupportsEagle3 in a later release is warned about on a target
    before that release and not from it (the table holds every known release, not only the newest)."""
    from specreg.normalization import capabilities

    known = capabilities.aux_capture_releases()  # the known releases and the older ones read
    arch, runs = next((a, r) for a, r in sorted(_aux_runs().items()) if r[0][0] != known[0] and r[0][1] is None)
    first = known.index(runs[0][0])
    before = _no_aux_capture(tmp_path / "before", arch, known[first - 1])
    assert before and f"vLLM {known[first - 1]} cannot capture" in before[0], before
    assert _no_aux_capture(tmp_path / "from", arch, known[first]) == []
    assert _no_aux_capture(tmp_path / "newest", arch, known[-1]) == []


def test_a_verifier_served_by_the_transformers_backend_captures_aux_states(tmp_path):
    """From vLLM 0.32 the registry serves SmolLM3ForCausalLM (and GLM, OLMo, Phi, ...) with the Transformers
    backend's TransformersForCausalLM, whose base `Base` (vllm/model_executor/models/transformers/base.py,
    0.34.0) implements SupportsEagle3. The table once read only the models folder's top-level files and
    missed it, so specreg warned about a verifier vLLM serves; the vllm tier checks the table against
    vLLM's own supports_eagle3 (tests/vllm_tier/test_vllm_configs.py)."""
    from specreg import facts

    for arch in ("SmolLM3ForCausalLM", "GlmForCausalLM", "TransformersForCausalLM"):
        assert arch in _aux_runs(), arch
        assert _no_aux_capture(tmp_path / arch, arch, facts.known()[-1]) == [], arch
