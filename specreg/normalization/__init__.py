"""From a config to the `Speculator` served as trained: the algorithm registry, the field reader, the shared family rules, the vLLM version facts they use, and the findings."""
