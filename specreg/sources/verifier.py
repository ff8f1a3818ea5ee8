"""A verifier's config.json, read once as a source (a Hub id, a local directory or a config file): the
file, the part that describes its language model (`text_config` for a multimodal verifier, else the
whole config), the architectures it names and the facts its fields state (`specreg.sources.decoder`:
sizes, head size, dtype, MLA latent, state layers). What vLLM makes of them (its name for the
quantization method, the layer groups its attention selector sees, the KV-cache pages) is the vllm
stage's (`specreg.vllm.verifier_check`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs

from specreg.errors import ConfigError, OfflineError
from specreg.sources import decoder, hub
from specreg.sources.files import is_repo_id, read_config


@attrs.frozen
class VerifierConfig:
    id: str
    config: dict[str, Any] = attrs.field(repr=False)
    #: text_config where the verifier is multimodal, else the config itself
    body: dict[str, Any] = attrs.field(repr=False)
    text_config: bool
    architectures: tuple[str, ...]

    @classmethod
    def of(cls, config: dict[str, Any], verifier: str) -> VerifierConfig:
        """The verifier `verifier` from its parsed config.json."""
        text = config.get("text_config") if isinstance(config.get("text_config"), dict) else None
        archs = config.get("architectures")
        names = tuple(a for a in archs if isinstance(a, str)) if isinstance(archs, list) else ()
        return cls(id=verifier, config=config, body=text or config, text_config=text is not None, architectures=names)

    # What the language model's fields state, as written (`body`; the top level for what a multimodal
    # config keeps there).

    @property
    def num_hidden_layers(self) -> int | None:
        return decoder.int_value(self.body.get("num_hidden_layers"))

    @property
    def hidden_size(self) -> int | None:
        return decoder.int_value(self.body.get("hidden_size"))

    @property
    def vocab_size(self) -> int | None:
        return decoder.int_value(
            self.body["vocab_size"] if "vocab_size" in self.body else self.config.get("vocab_size")
        )

    @property
    def head_size(self) -> int | None:
        return decoder.head_size(self.body)

    @property
    def dtype(self) -> str | None:
        return decoder.config_dtype(self.body, self.config)

    @property
    def max_position_embeddings(self) -> int | None:
        return decoder.int_value(self.body.get("max_position_embeddings"))

    @property
    def attention_chunk_size(self) -> int | None:
        return decoder.int_value(self.body.get("attention_chunk_size"))

    @property
    def kv_heads(self) -> int | None:
        """num_key_value_heads, else num_attention_heads."""
        return decoder.int_value(self.body.get("num_key_value_heads")) or decoder.int_value(
            self.body.get("num_attention_heads")
        )

    @property
    def sliding_window(self) -> int | None:
        return decoder.int_value(self.body.get("sliding_window"))

    @property
    def mla_latent(self) -> int | None:
        return decoder.mla_latent(self.body)

    @property
    def state_layers(self) -> tuple[int, ...]:
        return decoder.state_layers(self.body)


#: what to do when the Hub cannot give the verifier's config
LOCAL_VERIFIER_FIX = "name a local copy of the verifier (--verifier LOCAL_DIR, a directory holding its config.json)"


def read_verifier(verifier: str, *, source: str, hub_only: bool = False) -> VerifierConfig:
    """The verifier's config.json; never its weights.

    hub_only: the name came from a Hub config (someone else's file), so it may only name a Hub repo:
    a remote config never makes specreg read a local path (`/dev/stdin`, `/etc/...`)."""
    if hub_only and not is_repo_id(verifier):
        raise ConfigError(
            f"the Hub config names the verifier {verifier!r}, which is not a Hub repo id; specreg "
            "reads no local path a remote file names. Pass the verifier yourself (--verifier)",
            "$.speculators_config.verifier.name_or_path",
            source=source,
        )
    local = Path(verifier).expanduser()
    if not hub_only and not local.exists() and verifier.startswith((".", "/", "~")):
        raise ConfigError("no such file or directory", "verifier", source=verifier)
    if not hub_only and local.exists():
        path = local / hub.CONFIG_NAME if local.is_dir() else local
        config, _ = read_config(path, source=str(path))
    else:
        try:
            fetched = hub.fetch_config(verifier, None, source=verifier)
        except OfflineError as exc:
            raise OfflineError(f"{exc.message}; {LOCAL_VERIFIER_FIX}", source=exc.source) from None
        config, _ = read_config(fetched.path, source=f"{verifier}/{hub.CONFIG_NAME}")
    return VerifierConfig.of(config, verifier)
