"""A verifier's config.json, read once as a source (a Hub id, a local directory or a config file): the
file, the part that describes its language model (`text_config` for a multimodal verifier, else the
whole config) and the architectures it names. What vLLM makes of those fields (head size, dtype, KV
cache, quantization method, layer groups) is the vllm stage's (`specreg.vllm.verifier_check`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs

from specreg.errors import ConfigError, OfflineError
from specreg.sources import hub
from specreg.sources.files import is_repo_id, read_config


@attrs.frozen
class VerifierConfig:
    id: str
    config: dict[str, Any] = attrs.field(repr=False)
    #: text_config where the verifier is multimodal, else the config itself
    body: dict[str, Any] = attrs.field(repr=False)
    text_config: bool
    architectures: tuple[str, ...]


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
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else None
    archs = config.get("architectures")
    names = tuple(a for a in archs if isinstance(a, str)) if isinstance(archs, list) else ()
    return VerifierConfig(
        id=verifier, config=config, body=text or config, text_config=text is not None, architectures=names
    )
