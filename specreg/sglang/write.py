"""The SGLang-ready draft directory: the exported config.json, the draft's weights (linked, copied or
left out) and a signed specreg.json, written as one write as the vLLM directory is
(`specreg.vllm.materialize.write_locked`, through specreg/dirwrite.py)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

import attrs

from specreg.errors import SpecregError
from specreg.sources.files import MANIFEST
from specreg.vllm import materialize as vllm_dir
from specreg.vllm.manifest import draft_identity, serve_folder

#: a `specreg.sglang.export.SGLangPlan`: named, not imported, because its `materialize()` calls this
#: module (one arrow, export -> write; tests/test_architecture.py finds import circles)
SGLangPlan = Any


@attrs.frozen
class Written:
    """An SGLang-ready directory and what it holds."""

    directory: Path
    plan: "SGLangPlan"
    files: tuple[str, ...]
    weights: str

    def argv(self, *, verifier: str | None = None, extra: tuple[str, ...] = ()) -> list[str]:
        return self.plan.argv(str(self.directory), verifier=verifier, extra=extra)


def materialize(
    plan: "SGLangPlan",
    directory: str | os.PathLike[str],
    *,
    weights: str = "link",
    force: bool = False,
    progress: Callable[[str], None] | None = None,
) -> Written:
    """Write `plan` as an SGLang-ready directory; refused (nothing written) when SGLang cannot serve it as trained."""
    spec = plan.speculator
    vllm_dir.check_weight_mode(weights)
    source = spec.origin.source if spec.origin else None
    if not plan.servable:
        raise SpecregError(
            f"not servable as trained by SGLang {plan.sglang_version} "
            f"({', '.join(sorted({f.code for f in plan.errors}))}); nothing was written",
            source=source,
        )
    say = progress or (lambda _msg: None)
    target = Path(directory).expanduser().absolute()
    vllm_dir.refuse_source_as_target(spec, target)
    vllm_dir.refuse_before_download(target, force)
    sources = vllm_dir.weight_sources(spec, weights, say)
    manifest = {
        "written_by": "specreg",
        "engine": "sglang",
        "sglang_version": plan.sglang_version,
        "source": spec.origin.to_dict() if spec.origin else None,
        "identity": draft_identity(spec),
        "algorithm": plan.algorithm,
        "verifier": plan.verifier,
        "flags": list(plan.flags),
        "weights": weights,
        "files": ["config.json", *sources, MANIFEST],
        "findings": [f.to_dict() for f in plan.findings],
    }
    vllm_dir.write_locked(target, force, plan.config_dict(), sources, weights, manifest, say)
    return Written(directory=target, plan=plan, files=tuple(manifest["files"]), weights=weights)


def default_directory(plan: "SGLangPlan") -> Path:
    """Where `specreg serve --engine sglang` writes a draft: one directory per source, weights and SGLang release."""
    return serve_folder(plan.speculator, f"sglang{plan.sglang_version}")
