"""Where prompts run and counters come from: a vLLM server (`--server URL`) or vLLM in-process.

Both run the prompts in chunks and return one counter delta per chunk. The server engine talks to
vLLM's OpenAI-compatible API with httpx and reads `/metrics` before and after each chunk; it refuses
to start when the counters move while it is idle (someone else is using the server). The in-process
engine is a thin adapter over `vllm.LLM` (`disable_log_stats=False`, counters from
`LLM.get_metrics()`); it needs CUDA and is tested by the `gpu` tier only.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Callable, Sequence

import attrs

from specreg.errors import SpecregError, clipped
from specreg.verify.counters import CounterError, SpecCounters, from_prometheus, from_vllm_metrics
from specreg.verify.urls import redact


if TYPE_CHECKING:
    from vllm import LLM


class EngineError(SpecregError):
    """The engine failed (unreachable server, HTTP errors, missing counters, vLLM crashed)."""


class RunTimeout(EngineError):
    """The run passed its --timeout."""


class BadAnswer(EngineError):
    """The server answered something that cannot be a measurement (too large, not JSON, counters that
    are not finite, go backwards or contradict each other): bad input, recorded as `invalid`."""


#: bounds on what a server may send back: /metrics, /v1/models and /version are small documents
SMALL_ANSWER_BYTES = 32 * 1024 * 1024
SMALL_ANSWER_SECONDS = 30.0
#: a completion's own answer (we read nothing from it but must not hold an endless stream)
COMPLETION_BYTES = 64 * 1024 * 1024
#: what is read of an error answer, for its message
ERROR_BODY_BYTES = 64 * 1024


def chunks(items: Sequence[Any], n_chunks: int) -> list[Sequence[Any]]:
    """The prompts in `n_chunks` interleaved chunks (chunk i: prompts i, i + n, i + 2n, ...): a dataset
    ordered by category (MT-Bench: ten of each in turn) puts every category in every chunk, so the
    chunks measured before an early stop are a sample of the whole, not of its first categories."""
    n_chunks = max(1, min(n_chunks, len(items)))
    return [items[i::n_chunks] for i in range(n_chunks)]


class Interrupted(Exception):
    """Ctrl-C during a measurement, with the chunks measured before it."""

    def __init__(self, deltas: list[SpecCounters], done: int, total: int) -> None:
        super().__init__(f"interrupted (Ctrl-C) after {done}/{total} prompts")
        self.deltas, self.done, self.total = deltas, done, total


def measure(
    counters: Callable[[], SpecCounters],
    items: Sequence[Any],
    n_chunks: int,
    run_chunk: Callable[[Sequence[Any]], None],
    progress: Callable[[str], None],
    deadline: float | None = None,
    skip: int = 0,
    stop: Callable[[list[SpecCounters], int], bool] | None = None,
    max_tokens: int | None = None,
) -> list[SpecCounters]:
    """Run the prompts chunk by chunk; the counters' delta over each chunk is that chunk's measure.
    `deadline` (time.monotonic()) is checked before each chunk. `skip`: chunks measured by an
    interrupted run that this one resumes (not run again; their deltas are the caller's). `stop`
    (the deltas so far, the prompts done) is asked after each chunk whether the verdict is decided:
    then the rest is not run (verify's sequential test). `max_tokens`: each prompt's output limit, which
    bounds what a chunk's counters can have counted."""
    from specreg.verify.counters import check_delta, check_possible

    deltas, done = [], 0
    parts = chunks(items, n_chunks)
    done = sum(len(p) for p in parts[:skip])
    for i, part in enumerate(parts):
        if i < skip:
            continue
        if deadline is not None and time.monotonic() > deadline:
            raise RunTimeout(f"the run passed its --timeout after {done}/{len(items)} prompts")
        try:
            before = counters()
            began = time.perf_counter()
            run_chunk(part)
            took = time.perf_counter() - began
        except KeyboardInterrupt:
            raise Interrupted(deltas, done, len(items)) from None
        try:
            delta = check_delta(counters() - before, chunk=i + 1)
            check_possible(delta, requests=len(part), max_tokens=max_tokens, chunk=i + 1)
            deltas.append(attrs.evolve(delta, seconds=took))
        except CounterError as exc:
            raise BadAnswer(str(exc)) from None
        done += len(part)
        progress(f"{done}/{len(items)} prompts")
        if stop is not None and done < len(items) and stop(deltas, done):
            progress(f"decided after {done}/{len(items)} prompts: the rest is not run")
            break
    return deltas


def idle_wait_seconds() -> float:
    """How long the server must stay idle before a run: SPECREG_VERIFY_IDLE_WAIT (default 1 s)."""
    try:
        value = float(os.environ.get("SPECREG_VERIFY_IDLE_WAIT", "1"))
    except ValueError:
        return 1.0
    return value if 0 <= value < float("inf") else 1.0


class ServerEngine:
    """A vLLM server over HTTP. Every answer is bounded: its size (32 MiB for /metrics and the
    like), its total time (30 s for those, the run's remaining --timeout for completions), whatever
    pace the server sends at."""

    def __init__(
        self,
        url: str,
        *,
        model: str | None = None,
        timeout: float = 600.0,
        idle_wait: float | None = None,
        deadline: float | None = None,
        speculative: bool = True,
    ):
        import httpx

        self.url = url.rstrip("/")
        self.shown = redact(self.url)  # what messages and results may say (no password)
        from urllib.parse import urlsplit

        parts = urlsplit(self.url)
        # the password, or a user name standing alone that is long enough to be a token
        # (https://TOKEN@host), as redact hides them
        alone = parts.username if parts.password is None and len(parts.username or "") >= 8 else None
        self._secret = parts.password or alone
        self.timeout = timeout
        self.deadline = deadline
        self.client = httpx.Client(timeout=timeout)
        self.idle_wait = idle_wait_seconds() if idle_wait is None else idle_wait
        #: False for the engine without a draft that a speedup is measured against (no spec counters)
        self.speculative = speculative
        self._listing: Any = None
        self.model = model or self._served_model()

    def _remaining(self, limit: float) -> float:
        if self.deadline is None:
            return limit
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise RunTimeout(f"the run passed its --timeout (talking to {self.shown})")
        return min(limit, left)

    def _request(self, method: str, path: str, *, body: Any = None, max_bytes: int, seconds: float) -> bytes:
        """One request whose answer must be complete within `seconds` and `max_bytes`."""
        import httpx

        limit = self._remaining(seconds)
        end = time.monotonic() + limit
        try:
            with self.client.stream(method, self.url + path, json=body, timeout=limit) as r:
                if not r.is_success:
                    raise EngineError(
                        f"{self.shown}{path}: HTTP {r.status_code} {r.reason_phrase}" + self._said(r, end)
                    )
                data = bytearray()
                for chunk in r.iter_bytes():
                    data += chunk
                    if len(data) > max_bytes:
                        raise BadAnswer(f"{self.shown}{path}: the answer passed {max_bytes} bytes: refused")
                    if time.monotonic() > end:
                        if self.deadline is not None and time.monotonic() >= self.deadline:
                            raise RunTimeout(f"the run passed its --timeout ({self.shown}{path} still answering)")
                        raise EngineError(f"{self.shown}{path}: no complete answer within {limit:g} s")
                return bytes(data)
        except httpx.HTTPError as exc:
            if self.deadline is not None and time.monotonic() > self.deadline:
                raise RunTimeout(f"the run passed its --timeout ({self.shown}{path})") from None
            raise EngineError(f"{self.shown}{path}: {type(exc).__name__}: {self._clean(exc)}") from None

    def _said(self, r: Any, end: float) -> str:
        """What an error answer says, for the error line: the message of vLLM's (OpenAI's) error body
        `{"error": {"message": ...}}`, else the body's text; shortened and escaped. Read within the
        request's time and at most ERROR_BODY_BYTES."""
        import json

        import httpx

        data = bytearray()
        try:
            for chunk in r.iter_bytes():
                data += chunk
                if len(data) >= ERROR_BODY_BYTES or time.monotonic() > end:
                    break
        except httpx.HTTPError:
            pass  # what came before the failure is what it said
        text = bytes(data[:ERROR_BODY_BYTES]).decode("utf-8", errors="replace")
        try:
            doc = json.loads(text)
        except ValueError:
            doc = None
        error = doc.get("error") if isinstance(doc, dict) else None
        message = (
            error.get("message")
            if isinstance(error, dict)
            else error
            if isinstance(error, str)
            else doc.get("message")
            if isinstance(doc, dict)
            else None
        )
        said = message if isinstance(message, str) else " ".join(text.split())
        said = self._clean(said)
        return f": the server said {clipped(said, 300)}" if said else ""

    def _json(self, path: str) -> Any:
        import json

        try:
            return json.loads(self._request("GET", path, max_bytes=SMALL_ANSWER_BYTES, seconds=SMALL_ANSWER_SECONDS))
        except ValueError:
            raise BadAnswer(f"{self.shown}{path}: the answer is not JSON") from None

    def _clean(self, exc: BaseException) -> str:
        """An error's text without the URL's password (httpx messages quote the URL)."""
        text = str(exc).replace(self.url, self.shown)
        return text.replace(self._secret, "***") if self._secret else text

    def _models(self) -> Any:
        """/v1/models, fetched once (the served model's name and the served-model check both read it)."""
        if self._listing is None:
            self._listing = self._json("/v1/models")
        return self._listing

    def _served_model(self) -> str:
        doc = self._models()
        data = doc.get("data") if isinstance(doc, dict) else None
        if not isinstance(data, list) or not data:
            raise EngineError(f"{self.shown}/v1/models lists no model")
        first = data[0]
        if not isinstance(first, dict) or not isinstance(first.get("id"), str) or not first["id"]:
            raise BadAnswer(f"{self.shown}/v1/models: the first model has no id ({str(first)[:80]})")
        return first["id"]

    def served_models(self) -> list[tuple[str, str | None]]:
        """(id, root) of every model /v1/models lists (vLLM's root is the path or Hub id it loaded)."""
        doc = self._models()
        data = doc.get("data") if isinstance(doc, dict) else None
        out = []
        for item in data if isinstance(data, list) else ():
            if isinstance(item, dict) and isinstance(item.get("id"), str):
                root = item.get("root")
                out.append((item["id"], root if isinstance(root, str) else None))
        return out

    def counters(self) -> SpecCounters:
        text = self._request("GET", "/metrics", max_bytes=SMALL_ANSWER_BYTES, seconds=SMALL_ANSWER_SECONDS)
        try:
            return from_prometheus(text.decode("utf-8", errors="replace"), speculative=self.speculative)
        except CounterError as exc:
            raise BadAnswer(f"{self.shown}/metrics: {self._clean(exc)}") from None

    def version(self) -> str | None:
        try:
            doc = self._json("/version")
        except RunTimeout:
            raise
        except EngineError:
            return None
        version = doc.get("version") if isinstance(doc, dict) else None
        return version if isinstance(version, str) else None

    def check_idle(self) -> None:
        first = self.counters()
        time.sleep(self.idle_wait)
        moved = self.counters() - first
        if moved.moved:
            raise EngineError(
                f"the spec-decode counters of {self.shown} moved while idle ({moved.to_dict()}): another "
                "client is using the server, so the deltas would not be this run's"
            )

    def _one(self, item: Any, sampling: dict[str, Any]) -> None:
        if isinstance(item, str):
            path, body = "/v1/completions", {"model": self.model, "prompt": item, **sampling}
        else:
            path, body = "/v1/chat/completions", {"model": self.model, "messages": item, **sampling}
        self._request("POST", path, body=body, max_bytes=COMPLETION_BYTES, seconds=self.timeout)

    def run(
        self,
        items: Sequence[Any],
        *,
        n_chunks: int,
        concurrency: int,
        temperature: float,
        max_tokens: int,
        seed: int | None,
        thinking: bool | None,
        progress: Callable[[str], None],
        stop: Sequence[str] | None = None,
        skip: int = 0,
        decided: Callable[[list[SpecCounters], int], bool] | None = None,
    ) -> list[SpecCounters]:
        self.check_idle()
        sampling = sampling_kwargs(temperature=temperature, max_tokens=max_tokens, seed=seed, stop=stop)
        if thinking is not None:
            sampling["chat_template_kwargs"] = {"enable_thinking": thinking}
        with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
            return measure(
                self.counters,
                items,
                n_chunks,
                lambda part: list(pool.map(lambda item: self._one(item, sampling), part)),
                progress,
                deadline=self.deadline,
                skip=skip,
                stop=decided,
                max_tokens=max_tokens,
            )


def require_vllm() -> None:
    """The in-process engine's first need, checked before anything is downloaded for it."""
    try:
        import vllm  # noqa: F401
    except ImportError:
        raise EngineError(
            "the in-process engine needs vLLM (pip install vllm) and a GPU; or use --server URL"
        ) from None


class InProcessEngine:
    """vLLM in this process (CUDA needed). Typed against vLLM's public API only."""

    def __init__(self, kwargs: dict[str, Any], *, deadline: float | None = None):
        """`kwargs`: the `vllm.LLM` arguments (`engine_kwargs` builds them; without a
        speculative_config it is the baseline engine of a speedup). `deadline` is checked between
        chunks (a `generate` call in progress cannot be interrupted)."""
        self.deadline = deadline
        self.speculative = kwargs.get("speculative_config") is not None
        require_vllm()
        from vllm import LLM

        try:
            self.llm: "LLM" = LLM(**kwargs)
        except Exception as exc:  # CUDA, memory, model loading: the engine failed, not the input
            raise EngineError(f"vLLM could not start: {type(exc).__name__}: {exc}") from None

    def counters(self) -> SpecCounters:
        return from_vllm_metrics(self.llm.get_metrics(), speculative=self.speculative)

    def close(self) -> None:
        """Stop the engine (its memory is freed for the next one, e.g. the baseline engine)."""
        import gc

        core = getattr(getattr(self.llm, "llm_engine", None), "engine_core", None)
        if core is not None and hasattr(core, "shutdown"):
            core.shutdown()
        del self.llm
        gc.collect()

    def version(self) -> str | None:
        import vllm

        return vllm.__version__

    def run(
        self,
        items: Sequence[Any],
        *,
        n_chunks: int,
        concurrency: int,
        temperature: float,
        max_tokens: int,
        seed: int | None,
        thinking: bool | None,
        progress: Callable[[str], None],
        stop: Sequence[str] | None = None,
        skip: int = 0,
        decided: Callable[[list[SpecCounters], int], bool] | None = None,
    ) -> list[SpecCounters]:
        from vllm import SamplingParams

        params = SamplingParams(**sampling_kwargs(temperature=temperature, max_tokens=max_tokens, seed=seed, stop=stop))
        extra = {"chat_template_kwargs": {"enable_thinking": thinking}} if thinking is not None else {}

        def run_chunk(part: Sequence[Any]) -> None:
            try:
                if isinstance(part[0], str):
                    self.llm.generate(list(part), params, use_tqdm=False)
                else:
                    self.llm.chat(list(part), params, use_tqdm=False, **extra)
            except Exception as exc:
                raise EngineError(f"vLLM failed while generating: {type(exc).__name__}: {exc}") from None

        return measure(
            self.counters,
            items,
            n_chunks,
            run_chunk,
            progress,
            deadline=self.deadline,
            skip=skip,
            stop=decided,
            max_tokens=max_tokens,
        )


def engine_kwargs(
    llm_kwargs: dict[str, Any],
    *,
    batch_size: int | None = None,
    seed: int | None = None,
    tensor_parallel_size: int | None = None,
    max_model_len: int | None = None,
    draft_sample_method: str | None = None,
    prefix_caching: bool | None = None,
) -> dict[str, Any]:
    """The `vllm.LLM(**kwargs)` of a run: the draft's own kwargs (specreg's plan) plus the harness's
    engine options; counters on (`disable_log_stats=False`, as vLLM's CI tests set it)."""
    kwargs = dict(llm_kwargs, disable_log_stats=False)
    if batch_size:
        kwargs["max_num_seqs"] = batch_size
    if seed is not None:
        kwargs["seed"] = seed
    if tensor_parallel_size:
        kwargs["tensor_parallel_size"] = tensor_parallel_size
    if max_model_len:
        kwargs["max_model_len"] = max_model_len
    if draft_sample_method:
        kwargs["speculative_config"] = dict(
            kwargs.get("speculative_config") or {}, draft_sample_method=draft_sample_method
        )
    if prefix_caching is not None:
        kwargs["enable_prefix_caching"] = prefix_caching
    return kwargs


def sampling_kwargs(
    *, temperature: float, max_tokens: int, seed: int | None = None, stop: Sequence[str] | None = None
) -> dict[str, Any]:
    """The sampling parameters of every request of a run (`vllm.SamplingParams(**kwargs)` in-process,
    the request body's fields against a server); a seed or stop strings only when given."""
    out: dict[str, Any] = {"temperature": temperature, "max_tokens": max_tokens}
    if seed is not None:
        out["seed"] = seed
    if stop:
        out["stop"] = list(stop)
    return out


def gpu_info() -> tuple[str | None, str | None]:
    """(GPU name, driver version) from nvidia-smi on this machine, or (None, None)."""
    import shutil
    import subprocess

    if not shutil.which("nvidia-smi"):
        return None, None
    try:
        out = (
            subprocess.run(
                ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=20,
            )
            .stdout.strip()
            .splitlines()
        )
    except (OSError, subprocess.TimeoutExpired):
        return None, None
    if not out:
        return None, None
    name, _, driver = out[0].partition(",")
    return f"{len(out)}x{gpu_name(name)}", driver.strip() or None


def gpu_name(name: str) -> str:
    """nvidia-smi's product name in the catalog's form: "NVIDIA H100 80GB HBM3" -> "H100",
    "NVIDIA A100-SXM4-80GB" -> "A100", "NVIDIA GeForce RTX 4090" -> "RTX4090"."""
    import re

    words = [w for w in name.replace("-", " ").split() if w.upper() not in ("NVIDIA", "GEFORCE", "TESLA")]
    if not words:
        return name.strip()
    if words[0].upper() in ("RTX", "GTX", "QUADRO") and len(words) > 1:
        return (words[0] + words[1]).upper()
    return re.sub(r"[^A-Za-z0-9]", "", words[0]).upper() or name.strip()
