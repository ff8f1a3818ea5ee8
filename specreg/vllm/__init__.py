"""Using a normalized draft with one vLLM version: the vLLM-ready directory, the pre-flight checks, the speculators-format twin, and the vLLM plugin."""
