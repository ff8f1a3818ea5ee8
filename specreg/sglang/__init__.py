"""SGLang, the second engine: the same trained plan served by SGLang (`sglang_plan`, `export`), from
rules read from each SGLang release (specreg/sglang/rules/). Nothing here imports SGLang."""
