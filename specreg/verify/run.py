"""`specreg verify MODEL`: one measurement, its statistics, the verdict, and every output file."""

from __future__ import annotations

import datetime as dt
import json
import math
import sys
import platform
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Mapping

import attrs

from specreg.errors import HubError, SpecregError, clipped, printable
from specreg.verify import outputs
from specreg.verify.engines import (
    BadAnswer,
    EngineError,
    InProcessEngine,
    Interrupted,
    RunTimeout,
    ServerEngine,
    chunks,
    engine_kwargs,
    gpu_info,
    require_vllm,
)
from specreg.verify import sequential
from specreg.verify.judge import decided as decided_verdict, judge
from specreg.verify.prompts import RowsMismatch, load_prompts
from specreg.verify.stats import compute
from specreg.verify.urls import redact
from specreg.entries import Harness, PromptFormat

#: exit status per verdict (docs/verify.md): 0 judged fine or nothing to judge against, 1 regressed, 2 bad
#: input or refused, 4 the entry has baselines and the run matched none of them, 5 the engine failed
#: (3 is reserved for specreg's own bugs, as in every command), 130 interrupted
EXIT = {
    "pass": 0,
    "improved": 0,
    "no-baseline": 0,
    "secondary": 0,
    "not-runnable": 0,
    "regressed": 1,
    "out-of-band": 1,
    "refused": 2,
    "invalid": 2,
    "unmatched": 4,
    "error": 5,
    "timeout": 5,
    "crash": 5,
    "interrupted": 130,
}


@attrs.define
class Options:
    server: str | None = None
    dataset: str = "gsm8k"
    dataset_file: str | None = None
    num_prompts: int | None = 80
    temperature: float = 0.0
    max_tokens: int = 256
    k: int | None = None
    batch_size: int | None = None
    concurrency: int = 1
    seed: int | None = 42
    chat: bool = True
    few_shot: int = 0
    thinking: bool | None = None
    chunks: int = 10
    gpu: str | None = None
    tensor_parallel_size: int | None = None
    strict_harness: bool = False
    update_baseline: bool = False
    registry: str | None = None
    served_model: str | None = None
    stop: tuple[str, ...] | None = None
    shots_split: str | None = None
    shots_file: str | None = None
    template: str | None = None
    max_model_len: int | None = None
    mode: str = "batched"  # or "prompt-at-a-time"
    statistic: str = "pooled"  # or "mean-per-prompt"
    draft_sample_method: str | None = None
    prefix_caching: bool | None = None
    #: seconds the whole run may take (None: no limit); requests to a server are bounded by what is left
    timeout: float | None = None
    #: where the harness came from (`harness.resolve`): the baseline it reproduces, the fields overridden
    harness_from: dict[str, Any] | None = None
    #: measure the same prompts without the draft for a speedup: "in-process", or a server's URL
    compare_baseline_engine: str | None = None
    #: continue the interrupted run whose result is in --out (same harness): its measured chunks are kept
    resume: bool = False
    #: stop as soon as the verdict is decided (specreg.verify.sequential); False: every planned prompt
    early_stop: bool = True
    #: judge the draft against this catalog entry's baseline (`verify DRAFT --against ENTRY[:N]`): another
    #: draft's baseline, its harness and its gate
    against: str | None = None


def against_text(entry_id: str, index: int | None) -> str:
    """What a run judged with `--against` says, in the result, summary.md, the page and the command."""
    which = f"baseline {index} of {entry_id}" if index is not None else entry_id
    return (
        f"judged against {which}: another draft's baseline (its harness and its gate), not this draft's own; "
        "the verdict says how this draft compares with it"
    )


def _k_from_counters(stats: Any) -> int | None:
    """The draft length the engine really used: its draft tokens per draft (vLLM's own
    `draft_tokens_per_step`), when that is a whole number."""
    c = stats.counters
    if not c.drafts:
        return None
    k = c.draft_tokens / c.drafts
    return round(k) if abs(k - round(k)) < 1e-9 else None


def matching_baselines(entry: Any, fields: tuple[str, ...]) -> str:
    """For a rows file that is not the run's dataset: the entry's baselines whose dataset it does hold
    (a dataset verify loads, a metric it measures), to run by `--baseline N` (not `--dataset`, which
    would leave the run with no baseline to judge against); "" when none does."""
    from specreg.verify.judge import describe, judged
    from specreg.verify.prompts import datasets_of

    if entry is None:
        return ""
    held = set(datasets_of(fields))  # each a dataset verify loads (harness.runnable's first half)
    found = [(i, b) for i, b in enumerate(entry.baselines) if b.harness.dataset in held and judged(b)]
    if not found:
        return ""
    return (
        "it holds the rows of "
        + "; ".join(describe(b, i) for i, b in found)
        + f" of {entry.id}: run it with --baseline {found[0][0]} (that baseline's harness and dataset)"
    )


def utc_now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def _engine_name(opts: Options) -> str:
    return "server " + redact(opts.server) if opts.server else "vllm in-process"


def failed_result(
    model: str,
    started: str,
    engine: str,
    verdict: str,
    error: str,
    *,
    harness: dict[str, Any] | None = None,
    environment: dict[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """The result of a run that measured nothing (invalid input, the engine failed, a crash or a
    timeout seen from outside): the same keys as a measured result, with nothing measured."""
    return {
        "model": model,
        "started": started,
        "engine": engine,
        "verdict": verdict,
        "error": error,
        "harness": harness or {"dataset": None},
        "environment": environment or {},
        "statistics": None,
        "judgement": None,
        "baseline": None,
        "notes": [],
        **extra,
    }


def catalog_entry(model: str, registry: str | None):
    from specreg import entries

    try:
        return entries.lookup(model, Path(registry) if registry else None)
    except entries.CatalogError:
        return None


def verify(
    model: str,
    opts: Options,
    *,
    out: Path | None,
    history: Path | None,
    progress: Callable[[str], None] = lambda _m: None,
) -> dict[str, Any]:
    """Run one verification and write its outputs; returns the result (see outputs.RESULT).
    Bad input (an unloadable or unservable model, a missing dataset) is a result too, with verdict
    "invalid", so that a nightly run records it like any other outcome."""
    started = utc_now()
    try:
        return _verify(model, opts, out=out, history=history, progress=progress, started=started)
    except SpecregError as exc:
        if out is None:
            raise
        result = failed_result(
            model, started, _engine_name(opts), "invalid", exc.line(), harness={"dataset": opts.dataset}
        )
        outputs.write_all(out, result, history)
        return result


def run_prompts(opts: Options):
    """The prompts of a run, as its Options ask for them."""
    return load_prompts(
        opts.dataset,
        dataset_file=opts.dataset_file,
        num_prompts=opts.num_prompts,
        chat=opts.chat,
        few_shot=opts.few_shot,
        shots_split=opts.shots_split,
        shots_file=opts.shots_file,
        template=opts.template,
    )


def engine_options(opts: Options, entry: Any) -> dict[str, Any]:
    """The engine options of a run (see engines.engine_kwargs): the harness's, with the entry's
    [serving] (max_model_len, tensor parallel size) where the command line does not say."""
    serving = entry.serving if entry else None
    return {
        "batch_size": opts.batch_size,
        "seed": opts.seed,
        "tensor_parallel_size": opts.tensor_parallel_size or (serving.tensor_parallel_size if serving else None),
        "max_model_len": opts.max_model_len or (serving.max_model_len if serving else None),
        "draft_sample_method": opts.draft_sample_method,
        "prefix_caching": opts.prefix_caching,
    }


def _verify(
    model: str, opts: Options, *, out: Path | None, history: Path | None, progress: Callable[[str], None], started: str
) -> dict[str, Any]:
    from specreg.api import load
    from specreg.version import __version__

    entry = catalog_entry(opts.against or model, opts.registry)
    spec, notes = None, []
    try:
        spec = load(model)
    except HubError as exc:
        if not opts.server:
            raise
        notes.append(f"config not loaded ({exc.message}); the server's own configuration was measured")
    k = opts.k or (spec.num_speculative_tokens if spec else None) or (entry.serving.k if entry else None)
    try:
        prompts = run_prompts(opts)
    except RowsMismatch as exc:
        advice = matching_baselines(entry, exc.fields)
        if not advice:
            raise
        raise SpecregError(f"{exc.what}; {advice}", source=exc.source) from None
    options = engine_options(opts, entry)
    max_model_len, tp = options["max_model_len"], options["tensor_parallel_size"]
    one_at_a_time = opts.mode == "prompt-at-a-time"
    n_chunks, concurrency = (len(prompts.items), 1) if one_at_a_time else (opts.chunks, opts.concurrency)
    gpu, driver = gpu_info()
    environment: dict[str, Any] = {
        "gpu": opts.gpu or gpu,
        "driver": driver,
        "python": platform.python_version(),
        "specreg": __version__,
        "vllm_version": None,
    }
    result: dict[str, Any] = {
        "model": model,
        "verifier": None,  # what the engine ran the draft beside (set once the engine is up)
        "started": started,
        "engine": _engine_name(opts),
        "notes": notes,
        "dataset_source": prompts.source,
        "dataset_revision": prompts.revision or "unpinned",
    }
    if spec is not None:
        # the draft's own identity, for a model the catalog does not know (the report's columns)
        result["algorithm"], result["verifier"] = spec.algorithm, spec.verifier
    if opts.against:
        index = (opts.harness_from or {}).get("baseline_index")
        result["against"] = {"entry": opts.against, "baseline_index": index, "text": against_text(opts.against, index)}
        if spec is not None and spec.verifier and entry is not None and spec.verifier != entry.verifier.id:
            notes.append(
                f"the draft's verifier is {spec.verifier}, {opts.against}'s is {entry.verifier.id}: the baseline "
                "was measured on another verifier"
            )
    harness = Harness(
        dataset=prompts.dataset,
        subset=prompts.subset,
        split=prompts.split,
        num_prompts=len(prompts.items),
        # thinking is recorded only where it is sent: raw completions carry no chat template kwargs
        prompt=PromptFormat(
            chat_template=prompts.chat,
            few_shot=prompts.few_shot,
            thinking=opts.thinking if prompts.chat else None,
            shots_split=prompts.shots_split,
            template=prompts.template,
        ),
        temperature=opts.temperature,
        max_tokens=opts.max_tokens,
        k=k,
        batch_size=opts.batch_size,
        concurrency=str(concurrency) if opts.server else None,
        seed=opts.seed,
        gpu=environment["gpu"],
        tensor_parallel_size=tp,
        runs=1,
        stop=tuple(opts.stop) if opts.stop else None,
        max_model_len=max_model_len,
        mode=opts.mode,
        statistic=opts.statistic,
        draft_sample_method=opts.draft_sample_method,
        prefix_caching=opts.prefix_caching,
    )
    workdir = None
    kwargs = None
    deadline = None if opts.timeout is None else time.monotonic() + opts.timeout
    try:
        if opts.server:
            engine: Any = ServerEngine(
                opts.server, model=opts.served_model, deadline=deadline, timeout=min(600.0, opts.timeout or 600.0)
            )
        else:
            if spec is None or not spec.servable:
                raise SpecregError(f"{model}: not servable as trained by the targeted vLLM", source=model)
            require_vllm()  # before the draft's weights are downloaded for an engine that cannot start
            draft_dir = None
            if spec.materialize_reason:
                # outside --out: results are published, and a materialized draft holds links into the HF cache
                workdir = tempfile.mkdtemp(prefix="specreg-verify-")
                draft_dir = str(spec.materialize(Path(workdir) / "draft", progress=progress).directory)
            kwargs = spec.llm_kwargs(
                draft=draft_dir, verifier=None if spec.verifier else (entry.verifier.id if entry else None)
            )
            if opts.k:
                kwargs["speculative_config"]["num_speculative_tokens"] = opts.k
            engine = InProcessEngine(engine_kwargs(kwargs, **options), deadline=deadline)
        environment["vllm_version"] = engine.version()
        result["verifier"] = _measured_verifier(engine, kwargs)
        harness = attrs.evolve(harness, vllm_version=environment["vllm_version"])
        if opts.server:
            _check_served(engine, model, spec, entry)
        if opts.strict_harness and entry is not None:
            # before any prompt is sent: what the harness already says (k may still be corrected by the counters)
            early = judge_harness(model, harness, entry, opts)
            if early is not None:
                return _finish(early, out, history)
        if opts.server:
            # what the in-process engine would pass to vllm.LLM: a server took it (or not) at launch
            set_at_launch = {
                k: v for k, v in engine_kwargs({}, **dict(options, seed=None)).items() if k != "disable_log_stats"
            }
            if set_at_launch:
                notes.append(
                    "engine options a server takes at launch, not per request (recorded as the harness, "
                    "not checked): " + ", ".join(f"{k}={v}" for k, v in set_at_launch.items())
                )
        if opts.resume:
            same = {"model": model, "verifier": result["verifier"], "vllm": environment["vllm_version"]}
            earlier = _resumable(out, harness, notes, same)
            progress(notes[-1])
        else:
            earlier = []
        items = prompts.items
        if one_at_a_time and opts.early_stop:
            # one prompt per chunk: in interleaved order, so that the prompts before a look span the dataset
            items = tuple(x for part in chunks(items, sequential.LOOKS) for x in part)
        looks: list[dict[str, Any]] = []
        decided = (
            stop_rule(opts, entry, harness, earlier, len(items), n_chunks, one_at_a_time, looks)
            if opts.early_stop and entry is not None and entry.baselines
            else None
        )
        try:
            deltas = earlier + engine.run(
                items,
                n_chunks=n_chunks,
                concurrency=concurrency,
                temperature=opts.temperature,
                max_tokens=opts.max_tokens,
                seed=opts.seed,
                thinking=opts.thinking if prompts.chat else None,
                progress=progress,
                stop=opts.stop,
                skip=len(earlier),
                decided=decided,
            )
        except Interrupted as exc:
            raise Interrupted(earlier + exc.deltas, exc.done, exc.total) from None
        stats = compute(deltas, opts.statistic)
        parts = chunks(items, n_chunks)
        used = tuple(x for part in parts[: len(deltas)] for x in part)
        result["prompts_planned"], result["prompts_used"] = len(items), len(used)
        result["sequential"] = (
            {
                "test": "group-sequential, Pocock-type alpha spending (Lan-DeMets) over the early looks; "
                "the last look is the fixed-count test",
                "alpha_early": sequential.ALPHA_EARLY,
                "looks": looks,
                "stopped_early": len(used) < len(items),
            }
            if decided is not None
            else None
        )
        if opts.compare_baseline_engine:
            # the same prompts the drafting engine ran (all of them, or those before the early stop)
            result["throughput"] = _compare_without_draft(
                engine,
                opts,
                attrs.evolve(prompts, items=used),
                kwargs,
                options,
                stats,
                deadline,
                len(used) if one_at_a_time else len(deltas),
                concurrency,
                progress,
            )
        measured_k = _k_from_counters(stats)
        if measured_k is not None and measured_k != harness.k:
            if harness.k is not None:
                notes.append(
                    f"k: the server drafted {measured_k} tokens per step (its counters), not the "
                    f"{harness.k} the config or --k named; {measured_k} is recorded"
                )
            harness = attrs.evolve(harness, k=measured_k)
    except (KeyboardInterrupt, Interrupted) as exc:
        deltas = exc.deltas if isinstance(exc, Interrupted) else []
        what = str(exc) if isinstance(exc, Interrupted) else "interrupted (Ctrl-C)"
        try:
            partial = compute(deltas, opts.statistic).to_dict() if deltas else None
        except ValueError:  # the chunks so far drafted nothing
            partial = None
        result = failed_result(
            model,
            started,
            result["engine"],
            "interrupted",
            f"{what}: the chunks measured so far are kept, nothing was judged; the same command "
            "with --resume continues it",
            harness=_plain(harness),
            environment=environment,
            notes=notes,
            dataset_source=prompts.source,
            dataset_revision=result["dataset_revision"],
            verifier=result["verifier"],
            statistics=partial,
            chunk_counters=[d.chunk_dict() for d in deltas],
        )
        return _finish(result, out, history)
    except (EngineError, ValueError) as exc:
        # impossible counters or malformed answers are bad input (exit 2); a failing engine is exit 3
        verdict = "timeout" if isinstance(exc, RunTimeout) else "invalid" if isinstance(exc, BadAnswer) else "error"
        result = failed_result(
            model,
            started,
            result["engine"],
            verdict,
            str(exc),
            harness=_plain(harness),
            environment=environment,
            notes=notes,
            dataset_source=prompts.source,
            dataset_revision=result["dataset_revision"],
            verifier=result["verifier"],
            chunk_counters=[],
        )
        if out is not None:
            outputs.write_all(out, result, history)
        return result
    finally:
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)
    from_baseline = (opts.harness_from or {}).get("baseline_index")
    judgement = judge(stats, harness, entry, strict=opts.strict_harness, baseline=from_baseline)
    baseline = judgement.baseline
    result.update(
        verdict=judgement.verdict,
        harness=_plain(harness),
        harness_from=opts.harness_from,
        environment=environment,
        statistics=stats.to_dict(),
        chunk_counters=[d.chunk_dict() for d in deltas],
        judgement=_judgement_dict(judgement),
        baseline=None
        if baseline is None
        else {
            "kind": baseline.kind,
            "source": baseline.source,
            "secondary": baseline.secondary,
            # each metric the baseline records (None where it records none: a rate-only baseline has no AL)
            **{
                name: attrs.asdict(getattr(baseline.metrics, name)) if getattr(baseline.metrics, name) else None
                for name in ("acceptance_length", "draft_acceptance_rate")
            },
            "per_position": list(baseline.metrics.per_position.values) if baseline.metrics.per_position else None,
        },
    )
    if opts.update_baseline:
        result["baseline_update"] = (
            {"written": False, "reason": f"the baseline is {opts.against}'s, another draft's: nothing written"}
            if opts.against
            else update_baseline(entry, judgement, harness, stats, environment, opts.registry)
        )
    return _finish(result, out, history)


def stop_rule(
    opts: Options,
    entry: Any,
    harness: Harness,
    earlier: list[Any],
    planned: int,
    n_chunks: int,
    one_at_a_time: bool,
    looks: list[dict[str, Any]],
) -> Callable[[list[Any], int], bool]:
    """The sequential test's question after each chunk, as `engines.measure` asks it: is the verdict
    decided (specreg.verify.sequential)? Each look is recorded in `looks`."""
    points = sequential.look_points(planned, n_chunks, one_at_a_time)
    baseline = (opts.harness_from or {}).get("baseline_index")

    def decided(deltas: list[Any], done: int) -> bool:
        if done not in points:
            return False
        previous = ([0] + points)[points.index(done)]
        try:
            stats = compute(earlier + deltas, opts.statistic)
        except ValueError:  # nothing drafted yet
            return False
        k = _k_from_counters(stats)
        run_h = attrs.evolve(harness, k=k) if k is not None else harness
        judgement = judge(stats, run_h, entry, strict=opts.strict_harness, baseline=baseline)
        used: list[float] = []

        def critical(df: int) -> float:
            used.append(sequential.critical(done, planned, previous, df))
            return used[-1]

        verdict_decided = decided_verdict(stats, run_h, entry, judgement, critical)
        looks.append(
            {
                "prompts": done,
                # the largest finite critical value of the checks (None: none could stop the run, e.g. a
                # metric with too few chunks)
                "critical": max((c for c in used if c < math.inf), default=None),
                "verdict_so_far": judgement.verdict,
                "decided": verdict_decided,
            }
        )
        return verdict_decided

    return decided


def _measured_verifier(engine: Any, kwargs: Mapping[str, Any] | None) -> str | None:
    """What the engine runs the draft beside: the models a server lists (their roots, the path or
    Hub id each was loaded from), or the model handed to vllm.LLM."""
    if kwargs is not None:
        return kwargs.get("model")
    served = sorted({root or ident for ident, root in engine.served_models()})
    return ", ".join(served) or None


def _resumable(out: Path | None, harness: Harness, notes: list[str], same: Mapping[str, Any]) -> list[Any]:
    """The chunks an interrupted run in `out` measured, when it is this run: the same model, verifier
    and vLLM version (`same`: model, verifier, vllm) and the same harness (--resume); [] (and a note
    saying why) otherwise: chunks of another model or release would be judged as this one's."""
    from specreg.verify.counters import CounterError, SpecCounters

    if out is None or not (out / outputs.RESULT).is_file():
        notes.append("--resume: no earlier result in --out; measured from the start")
        return []
    from specreg.sources.files import read_regular

    try:
        # a result file in --out is read as every result is: a regular file, bounded (report's limit)
        earlier = json.loads(read_regular(out / outputs.RESULT, outputs.MAX_RESULT_BYTES).decode("utf-8"))
        if earlier.get("verdict") != "interrupted":
            notes.append(f"--resume: the earlier run finished ({earlier.get('verdict')}); measured from the start")
            return []
        theirs_said = {
            "model": earlier.get("model"),
            "verifier": earlier.get("verifier"),
            "vllm": (earlier.get("environment") or {}).get("vllm_version"),
        }
        for key, what in (("model", "model"), ("verifier", "verifier"), ("vllm", "vLLM version")):
            if theirs_said[key] != same[key] or same[key] is None:
                notes.append(
                    f"--resume: the earlier run's {what} was {_said(theirs_said[key])}, this run's is "
                    f"{_said(same[key])}; measured from the start"
                )
                return []
        mine = {k: v for k, v in _plain(harness).items() if k != "vllm_version"}
        theirs = {k: v for k, v in (earlier.get("harness") or {}).items() if k != "vllm_version"}
        if json.loads(json.dumps(mine, default=str)) != theirs:
            differ = sorted(
                k
                for k in mine.keys() | theirs.keys()
                if json.loads(json.dumps(mine.get(k), default=str)) != theirs.get(k)
            )
            notes.append(f"--resume: the earlier run's harness differs ({', '.join(differ)}); measured from the start")
            return []
        chunks = [SpecCounters.from_chunk_dict(d) for d in earlier.get("chunk_counters") or []]
    except (OSError, ValueError, CounterError, AttributeError) as exc:
        notes.append(f"--resume: the earlier result could not be read ({exc}); measured from the start")
        return []
    notes.append(f"resumed: {len(chunks)} chunk(s) measured by the interrupted run of {earlier.get('started')} kept")
    return chunks


def _said(value: Any) -> str:
    return "not recorded" if value is None else printable(clipped(str(value), 120))


def _compare_without_draft(
    engine: Any,
    opts: Options,
    prompts: Any,
    llm_kwargs: dict[str, Any] | None,
    options: dict[str, Any],
    stats: Any,
    deadline: float | None,
    n_chunks: int,
    concurrency: int,
    progress: Callable[[str], None],
) -> dict[str, Any]:
    """The same prompts on the engine without the draft: output tokens per second with and without,
    and the speedup. In-process the drafting engine is stopped first and the verifier started alone;
    against a server, `--compare-baseline-engine URL` names a server of the same verifier with no draft."""
    if opts.compare_baseline_engine == "in-process":
        if opts.server:
            raise ValueError("--compare-baseline-engine with --server needs the URL of a server without the draft")
        engine.close()
        plain = {k: v for k, v in engine_kwargs(llm_kwargs or {}, **options).items() if k != "speculative_config"}
        baseline: Any = InProcessEngine(plain, deadline=deadline)
    else:
        baseline = ServerEngine(
            opts.compare_baseline_engine,
            deadline=deadline,
            speculative=False,
            timeout=min(600.0, opts.timeout or 600.0),
        )
    progress("the same prompts without the draft")
    deltas = baseline.run(
        prompts.items,
        n_chunks=n_chunks,
        concurrency=concurrency,
        temperature=opts.temperature,
        max_tokens=opts.max_tokens,
        seed=opts.seed,
        thinking=opts.thinking if prompts.chat else None,
        progress=progress,
        stop=opts.stop,
    )
    if hasattr(baseline, "close"):
        baseline.close()
    from specreg.verify.stats import total as _total

    total = _total(deltas) if deltas else None
    without = total.generated / total.seconds if total is not None and total.generated and total.seconds else None
    with_draft = stats.output_tokens_per_s
    return {
        "engine_without_draft": "vllm in-process"
        if opts.compare_baseline_engine == "in-process"
        else "server " + redact(opts.compare_baseline_engine),
        "output_tokens_per_s": with_draft,
        "output_tokens_per_s_without_draft": without,
        "speedup": with_draft / without if with_draft and without else None,
        "note": "a property of this engine, GPU, batch and concurrency, measured once: not of the draft alone",
    }


def _finish(result: dict[str, Any], out: Path | None, history: Path | None) -> dict[str, Any]:
    if out is not None:
        try:
            outputs.write_all(out, result, history)
        except OSError:
            # the measurement is not lost with the disk: the whole result goes to stderr first
            print(f"# {out / outputs.RESULT} could not be written; the result, whole:", file=sys.stderr)
            print(json.dumps(result, default=str), file=sys.stderr)
            raise
    return result


def _judgement_dict(judgement: Any) -> dict[str, Any]:
    return {
        "baseline_index": judgement.baseline_index,
        "reason": judgement.reason,
        "differences": [d.text() for d in judgement.differences],
        "not_recorded_by_baseline": list(judgement.unrecorded),
        "others": [{"baseline_index": i, "verdict": v} for i, v in judgement.others],
        # each check with its line (measured, verdict, statistic and gate), as the command prints it
        "checks": [{**attrs.asdict(c), "text": c.text()} for c in judgement.checks],
    }


def judge_harness(model: str, harness: Harness, entry: Any, opts: Options) -> dict[str, Any] | None:
    """--strict-harness before measuring: a refused result when the harness differs from the
    baseline it would be compared with, else None."""
    from specreg.verify.judge import candidates, differences, pick_baseline

    index = (opts.harness_from or {}).get("baseline_index")
    found = dict(candidates(entry, harness))
    picked = (index, found[index]) if index in found else pick_baseline(entry, harness)
    if picked is None:
        return None
    diffs = [d for d in differences(harness, picked[1].harness) if d.field not in ("vllm_version",)]
    if not diffs:
        return None
    return failed_result(
        model,
        utc_now(),
        _engine_name(opts),
        "refused",
        "--strict-harness: the harness differs from baseline "
        f"{picked[0]}'s, nothing was measured: " + "; ".join(d.text() for d in diffs),
        harness=_plain(harness),
        harness_from=opts.harness_from,
        judgement={"baseline_index": picked[0], "differences": [d.text() for d in diffs]},
    )


def _served_names(value: str) -> set[str]:
    names = {value.rstrip("/")}
    tail = value.rstrip("/").rsplit("/", 1)[-1]
    if tail:
        names.add(tail)
    return names


def _check_served(engine: Any, model: str, spec: Any, entry: Any) -> None:
    """The server serves the verifier (or the draft) being verified: one of /v1/models' ids or roots
    names it (or a local copy with the same last path component). Unknown verifier: not checked."""
    expected = {n for n in (getattr(spec, "verifier", None), entry.verifier.id if entry is not None else None) if n}
    if not expected:
        return
    served = engine.served_models()
    wanted = set().union(*(_served_names(n) for n in expected | {model}))
    have = set().union(*(_served_names(n) for pair in served for n in pair if n))
    if not wanted & have:
        shown = ", ".join(f"{i}" + (f" ({r})" if r and r != i else "") for i, r in served) or "nothing"
        raise BadAnswer(
            f"the server serves {shown}, not {', '.join(sorted(expected))} (the verifier of {model}): "
            "another model would be measured and judged"
        )


def _plain(harness: Harness) -> dict[str, Any]:
    d = attrs.asdict(harness)
    d["prompt"] = {k: v for k, v in d["prompt"].items() if v is not None}
    return d


def update_baseline(
    entry: Any, judgement: Any, harness: Harness, stats: Any, environment: dict[str, Any], registry: str | None
) -> dict[str, Any]:
    """`--update-baseline`: a measured baseline beside the one the run reproduced, only for a run that
    passed it with the same harness, only into a catalog directory the user names (`--registry`),
    printed as a diff for review. Otherwise nothing is written and the reason is returned."""
    import os

    registry = registry or os.environ.get("SPECREG_REGISTRY") or None
    if entry is None:
        return {"written": False, "reason": "the model is not in the catalog: there is no entry to add a baseline to"}
    if registry is None:
        return {
            "written": False,
            "reason": "name the catalog directory to write into with --registry DIR (a "
            "checkout of the catalog); the shipped catalog is never written",
        }
    if judgement.verdict != "pass":
        return {
            "written": False,
            "reason": f"the run's verdict is {judgement.verdict}, not pass: a baseline is "
            "recorded only from a run that meets the one it sits beside",
        }
    if judgement.differences:
        return {
            "written": False,
            "reason": "the harness differs from baseline "
            f"{judgement.baseline_index}'s: " + "; ".join(d.text() for d in judgement.differences),
        }
    try:
        path, diff = write_measured_baseline(entry, harness, stats, environment, registry)
    except SpecregError as exc:
        return {"written": False, "reason": exc.line()}
    return {"written": True, "path": path, "diff": diff}


def write_measured_baseline(
    entry, harness: Harness, stats, environment: dict[str, Any], registry: str | None
) -> tuple[str, str]:
    """Append a `measured` baseline with its harness to the entry's TOML file (the rest is kept);
    (the file, the unified diff of the change)."""
    import difflib

    import tomlkit

    from specreg import atomic, entries

    root = entries.writable_root(registry)  # never into an installed package's catalog
    path = Path(entry.path)
    try:
        path.resolve().relative_to(Path(root).resolve())
    except ValueError:
        raise SpecregError(
            f"{entry.id} is read from {path}, not from the catalog directory {registry}: nothing written"
        ) from None
    before = entries.read_entry_text(path, Path(root))  # the catalog's own reading rule
    doc = tomlkit.parse(before)
    h = {k: v for k, v in _plain(harness).items() if v not in (None, {}, [])}
    metrics: dict[str, Any] = {
        "acceptance_length": {"value": round(stats.acceptance_length, 4)},
        "draft_acceptance_rate": {"value": round(stats.draft_acceptance_rate, 4)},
    }
    if stats.per_position:
        metrics["per_position"] = {"values": [round(p, 4) for p in stats.per_position]}
    if stats.al_interval:
        lo, hi = stats.al_interval
        metrics["acceptance_length"]["notes"] = f"95% CI {lo:.3f}-{hi:.3f} over {stats.chunks} chunks"
    table = tomlkit.table()
    table.add("kind", "measured")
    source = "specreg verify" + "".join(
        f", {v}"
        for v in (
            f"vLLM {environment['vllm_version']}" if environment.get("vllm_version") else None,
            environment.get("gpu"),
        )
        if v
    )
    table.add("source", source)
    table.add("date", dt.date.today().isoformat())
    table.add("harness", h)
    table.add("metrics", metrics)
    if "baselines" not in doc:
        doc.add("baselines", tomlkit.aot())
    doc["baselines"].append(table)
    text = tomlkit.dumps(doc)
    parsed, problems = entries.parse_entry(text, file=str(path))
    if problems or parsed is None:
        raise SpecregError(
            f"{path}: the measured baseline would not validate: "
            + "; ".join(f"{p.path}: {p.message}" for p in problems)
        )
    atomic.write_bytes(path, text.encode("utf-8"))
    diff = "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True),
            text.splitlines(keepends=True),
            fromfile=f"a/{path.name}",
            tofile=f"b/{path.name}",
        )
    )
    return str(path), diff
