"""A loopback server that speaks the parts of vLLM's OpenAI-compatible API that `specreg verify
--server` uses: /v1/models, /version, /v1/completions, /v1/chat/completions, and /metrics with
vLLM's spec-decode counters in Prometheus text (two engines' label sets, summed by readers).

Every completion request adds `drafts_per_request` drafts with `k` tokens each, accepted at
position i by a `rates[i]` fraction of drafts, so the expected acceptance length is exactly
1 + sum(rates). With `spread` > 0 prompts differ as real ones do: each request's rates are
`rates` times its own factor, drawn from a normal of mean 1 and that standard deviation by a
generator seeded with `seed` (one request at a time, the counts are the same every run).

On its own, `python tests/openai_server.py [--port N] [--model ID] [--rates 0.8,0.6,0.4] [--fail-status 400
--fail-message TEXT]` prints its URL on one line and serves until interrupted (`--help` lists every option).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class OpenAIServer:
    def __init__(
        self,
        *,
        rates=(0.8, 0.6, 0.4),
        drafts_per_request=100,
        model="org/verifier",
        version="0.33.0",
        speculative=True,
        port=0,
        spread=0.0,
        seed=0,
    ):
        import random

        self.rates = list(rates)
        self.spread = spread
        self.rng = random.Random(seed)
        self.k = len(self.rates)
        self.drafts_per_request = drafts_per_request
        self.model = model
        self.version = version
        self.lock = threading.Lock()
        #: False: a server of the verifier alone (one token per step, no spec-decode counters)
        self.speculative = speculative
        self.engines = [
            {"drafts": 0, "draft_tokens": 0, "accepted": 0, "per_pos": [0] * self.k, "generated": 0} for _ in range(2)
        ]
        self.requests: list[tuple[str, dict]] = []
        #: every completion request is answered with this status and an error body: vLLM's ErrorResponse
        #: (`{"error": {"message", "type", "param", "code"}}`, vllm/entrypoints/serve/engine/protocol.py in
        #: vLLM 0.32) saying `fail_message`, or `fail_body` as it is when that is set
        self.fail_status: int | None = None
        self.fail_message = "injected failure"
        self.fail_body: bytes | None = None
        self.delay = 0.0
        self.noisy = False  # counters move on their own (another client)
        #: hostile answers: /metrics padded to this many bytes, or sent one byte per `metrics_drip` s;
        #: /v1/models answered with these bytes
        self.metrics_flood: int | None = None
        self.metrics_drip: float | None = None
        self.models_body: bytes | None = None
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # headers and body go out as separate writes: without this, Nagle and the client's delayed
            # ACK hold every keep-alive answer for ~40 ms
            disable_nagle_algorithm = True

            def log_message(self, *args):
                pass

            def _send(self, status, body, ctype="application/json"):
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.path == "/v1/models" and server.models_body is not None:
                    return self._send(200, server.models_body)
                if self.path == "/metrics" and (server.metrics_flood or server.metrics_drip):
                    return self._hostile_metrics()
                if self.path == "/v1/models":
                    return self._send(200, {"object": "list", "data": [{"id": server.model, "object": "model"}]})
                if self.path == "/version":
                    return self._send(200, {"version": server.version})
                if self.path == "/metrics":
                    if server.noisy:
                        server._count(0)
                    return self._send(200, server.metrics().encode(), "text/plain; version=0.0.4")
                return self._send(404, {"error": "not found"})

            def _hostile_metrics(self):
                text = server.metrics().encode()
                size = server.metrics_flood or len(text)
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(size))
                self.end_headers()
                try:
                    if server.metrics_drip:
                        for i in range(size):
                            self.wfile.write(text[i : i + 1])
                            self.wfile.flush()
                            time.sleep(server.metrics_drip)
                    else:
                        self.wfile.write(text)
                        sent = len(text)
                        while sent < size:
                            chunk = b"#" * min(1 << 20, size - sent - 1) + b"\n"
                            self.wfile.write(chunk)
                            sent += len(chunk)
                except OSError:
                    pass
                self.close_connection = True

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with server.lock:
                    server.requests.append((self.path, body))
                if server.delay:
                    time.sleep(server.delay)
                if server.fail_status:
                    if server.fail_body is not None:
                        return self._send(server.fail_status, server.fail_body, "text/plain")
                    return self._send(
                        server.fail_status,
                        {
                            "error": {
                                "message": server.fail_message,
                                "type": "BadRequestError",
                                "param": None,
                                "code": server.fail_status,
                            }
                        },
                    )
                if self.path not in ("/v1/completions", "/v1/chat/completions"):
                    return self._send(404, {"error": "not found"})
                server._count(len(server.requests) % 2)
                if self.path == "/v1/completions":
                    return self._send(
                        200,
                        {
                            "id": "c",
                            "object": "text_completion",
                            "model": server.model,
                            "choices": [{"index": 0, "text": " 42", "finish_reason": "stop"}],
                        },
                    )
                return self._send(
                    200,
                    {
                        "id": "c",
                        "object": "chat.completion",
                        "model": server.model,
                        "choices": [
                            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "42"}}
                        ],
                    },
                )

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    def _count(self, engine: int) -> None:
        with self.lock:
            e = self.engines[engine]
            d = self.drafts_per_request
            if self.spread:
                factor = max(0.0, self.rng.gauss(1.0, self.spread))
                accepted_at = [round(d * min(1.0, r * factor)) for r in self.rates]
            else:  # the rates as given, impossible ones too (a test of refused counters sets them)
                accepted_at = [round(d * r) for r in self.rates]
            e["drafts"] += d
            e["draft_tokens"] += d * self.k
            e["accepted"] += sum(accepted_at)
            e["per_pos"] = [a + b for a, b in zip(e["per_pos"], accepted_at)]
            # every step makes one token, and a draft step its accepted ones too
            e["generated"] += d + (sum(accepted_at) if self.speculative else 0)

    def metrics(self) -> str:
        lines = []
        with self.lock:
            lines += ["# HELP vllm:generation_tokens Generation tokens.", "# TYPE vllm:generation_tokens counter"]
            lines += [
                f'vllm:generation_tokens_total{{engine="{i}",model_name="{self.model}"}} {float(e["generated"])}'
                for i, e in enumerate(self.engines)
            ]
            for name, key in (
                ("num_drafts", "drafts"),
                ("num_draft_tokens", "draft_tokens"),
                ("num_accepted_tokens", "accepted"),
            ):
                lines += [
                    f"# HELP vllm:spec_decode_{name} Spec decode counter.",
                    f"# TYPE vllm:spec_decode_{name} counter",
                ]
                for i, e in enumerate(self.engines if self.speculative else ()):
                    lines.append(
                        f'vllm:spec_decode_{name}_total{{engine="{i}",model_name="{self.model}"}} {float(e[key])}'
                    )
            lines += [
                "# HELP vllm:spec_decode_num_accepted_tokens_per_pos Accepted tokens per position.",
                "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter",
            ]
            for i, e in enumerate(self.engines if self.speculative else ()):
                for pos, value in enumerate(e["per_pos"]):
                    lines.append(
                        f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="{i}",'
                        f'model_name="{self.model}",position="{pos}"}} {float(value)}'
                    )
            lines += [
                "# HELP vllm:num_requests_running Running requests.",
                "# TYPE vllm:num_requests_running gauge",
                'vllm:num_requests_running{engine="0"} 0.0',
            ]
        return "\n".join(lines) + "\n"

    def __enter__(self) -> "OpenAIServer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def main(argv=None) -> None:
    """Run the server on its own until interrupted, printing its URL first (one line on stdout)."""
    import argparse

    parser = argparse.ArgumentParser(description="a loopback vLLM-like OpenAI server for specreg verify --server")
    parser.add_argument("--port", type=int, default=0, help="the port on 127.0.0.1 (default: a free one)")
    parser.add_argument("--model", default="org/verifier", help="the model /v1/models lists")
    parser.add_argument("--version", default="0.33.0", help="what /version answers")
    parser.add_argument(
        "--rates", default="0.8,0.6,0.4", help="acceptance rate per draft position, comma-separated (k is their number)"
    )
    parser.add_argument("--drafts-per-request", type=int, default=100)
    parser.add_argument("--spread", type=float, default=0.0, help="each request's rates vary by this factor (sd)")
    parser.add_argument("--seed", type=int, default=0, help="the seed of --spread's draws")
    parser.add_argument(
        "--no-speculative",
        dest="speculative",
        action="store_false",
        help="a server of the verifier alone (no spec-decode counters)",
    )
    parser.add_argument("--fail-status", type=int, help="answer every completion with this HTTP status")
    parser.add_argument("--fail-message", default="injected failure", help="the error message of --fail-status")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before answering each completion")
    args = parser.parse_args(argv)
    server = OpenAIServer(
        rates=tuple(float(r) for r in args.rates.split(",")),
        model=args.model,
        version=args.version,
        drafts_per_request=args.drafts_per_request,
        speculative=args.speculative,
        port=args.port,
        spread=args.spread,
        seed=args.seed,
    )
    server.fail_status, server.fail_message, server.delay = args.fail_status, args.fail_message, args.delay
    print(server.url, flush=True)
    try:
        server.server.serve_forever(poll_interval=0.05)
    except KeyboardInterrupt:
        pass
    finally:
        server.server.server_close()


if __name__ == "__main__":
    main()
