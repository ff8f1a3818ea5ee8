"""`specreg env`: what a bug report needs about the machine (as `vllm collect-env` and `hf env`): the
versions of specreg, vLLM and SGLang, whether the vLLM plugin acts on the installed vLLM, the Hub
settings and the caches. Nothing is imported from vLLM or SGLang: versions come from their metadata."""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from typing import Any

from specreg.cli.common import EXIT_OK, print_lines


def add_env(sub: Any) -> None:
    env = sub.add_parser(
        "env",
        help="versions, the vLLM plugin's state, Hub settings and caches (paste it into a bug report)",
        description="Print specreg's, vLLM's and SGLang's versions (installed or not), whether specreg's vLLM "
        "plugin is active for the installed vLLM, the Hub endpoint and offline mode, and the caches specreg reads "
        "and writes. Nothing is imported from vLLM or SGLang, and the Hub is not contacted.",
    )
    env.add_argument("--json", action="store_true", help="the same as one JSON object")


def _version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def _plugin(vllm: Any) -> dict[str, Any]:
    """Whether `vllm serve` runs specreg's plugin here, and why not (the checks of plugin.register and of
    vLLM's plugin loader: its entry point, VLLM_PLUGINS, SPECREG_VLLM_PLUGIN, the tested range)."""
    from importlib.metadata import entry_points

    from packaging.version import Version

    from specreg import facts

    tested = facts.plugin_tested()
    low, high = Version(tested[0]), Version(tested[-1] + ".99")  # any patch of the last tested release
    state = {"tested": f"{tested[0]}-{tested[-1]}", "active": False}
    allowed = os.environ.get("VLLM_PLUGINS")
    switch = os.environ.get("SPECREG_VLLM_PLUGIN", "1").strip().lower()
    if vllm is None:
        state["why"] = "no vLLM installed"
    elif not any(ep.name == "specreg" for ep in entry_points(group="vllm.general_plugins")):
        state["why"] = "specreg's vllm.general_plugins entry point is not installed (reinstall specreg)"
    elif switch in ("0", "false", "no", "off"):
        state["why"] = "turned off: SPECREG_VLLM_PLUGIN=0"
    elif allowed is not None and "specreg" not in [p.strip() for p in allowed.split(",")]:
        state["why"] = f"VLLM_PLUGINS={allowed} leaves specreg out"
    elif not low <= vllm <= high:
        state["why"] = f"vLLM {vllm} is outside the tested range: vLLM maps drafts itself"
    else:
        state["active"] = True
    return state


def collect() -> dict[str, Any]:
    """Everything `specreg env` prints, as plain values."""
    from specreg.dirwrite import cache_root
    from specreg.normalization.capabilities import NEWEST_KNOWN, installed_vllm, short
    from specreg.sglang import rules as sglang_rules
    from specreg.sources import hub
    from specreg.verify.urls import redact

    vllm = installed_vllm()
    sglang = sglang_rules.installed()
    hf_cache = hub.cache_dir()
    if hf_cache is None:
        from huggingface_hub import constants

        hf_cache = constants.HF_HUB_CACHE
    ours = cache_root()
    registry = os.environ.get("SPECREG_REGISTRY")
    return {
        "specreg": _version("specreg"),
        "python": f"{platform.python_version()} ({sys.executable})",
        "platform": platform.platform(),
        "vllm": {
            "installed": str(vllm) if vllm else None,
            "target": short(vllm) if vllm else short(NEWEST_KNOWN),
            "plugin": _plugin(vllm),
        },
        "sglang": {"installed": sglang, "rules": sglang_rules.target()[0] if sglang is None else sglang},
        "huggingface_hub": _version("huggingface_hub"),
        "hub": {
            # pasted into bug reports: a password or token in HF_ENDPOINT is never printed
            "endpoint": redact((os.environ.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")),
            "offline": hub.offline(),
        },
        "caches": {
            "huggingface": hf_cache,
            "specreg": str(ours),
            "specreg_drafts": len(os.listdir(ours / "drafts")) if (ours / "drafts").is_dir() else 0,
        },
        "catalog": registry or "shipped with specreg",
    }


def _drafts(n: int) -> str:
    return f"{n} materialized draft{'s' * (n != 1)}"


def _env(args: argparse.Namespace) -> int:
    info = collect()
    if args.json:
        print(json.dumps(info, indent=2, ensure_ascii=False))
        return EXIT_OK
    v, s, h, c = info["vllm"], info["sglang"], info["hub"], info["caches"]
    p = v["plugin"]
    plugin = "active" if p["active"] else f"inactive: {p['why']}"
    rows = [
        ("specreg", info["specreg"] or "not installed as a package"),
        ("python", info["python"]),
        ("platform", info["platform"]),
        (
            "vLLM",
            f"{v['installed']} (plans target {v['target']})"
            if v["installed"]
            else f"not installed (plans target {v['target']}, the newest known)",
        ),
        ("vLLM plugin", f"{plugin} (tested on vLLM {p['tested']})"),
        ("SGLang", f"{s['installed']}" if s["installed"] else f"not installed (plans use SGLang {s['rules']}'s rules)"),
        ("huggingface_hub", info["huggingface_hub"] or "not installed"),
        ("Hub endpoint", h["endpoint"] + ("" if os.environ.get("HF_ENDPOINT") else " (default; HF_ENDPOINT moves it)")),
        ("offline", "yes (HF_HUB_OFFLINE)" if h["offline"] else "no"),
        ("HF cache", c["huggingface"]),
        ("specreg cache", f"{c['specreg']} ({_drafts(c['specreg_drafts'])}; `specreg cache list`)"),
        ("catalog", info["catalog"]),
    ]
    print_lines([f"{k:<17}{val}" for k, val in rows])
    return EXIT_OK


HANDLERS = {"env": _env}
