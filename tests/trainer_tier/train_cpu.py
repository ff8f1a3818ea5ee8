"""speculators 0.9.0's own trainer (`speculators train`, speculators.train.cli.main) on torch+cpu.

    python train_cpu.py <the flags of `speculators train`>

With no accelerator, torch.accelerator.current_accelerator() is None, and the trainer still
assumes one in four places. Each is replaced at run time, here; no installed file is edited:

1. speculators/train/trainer.py, Trainer: `model.to(self.local_rank)` and `batch.to(self.local_rank)`
   with local_rank = get_local_rank() = 0, which torch reads as cuda:0. -> trainer.get_local_rank
   returns "cpu".
2. speculators/train/checkpointer.py, get_current_device(): "cuda:0" without an accelerator (the
   device a resumed checkpoint is loaded onto). -> "cpu".
3. speculators/train/trainer.py, _StepTimer.mark/now: torch.accelerator.synchronize() at every
   logged step ("Cannot access accelerator device when none is available"). -> the same
   perf_counter marks, without the synchronize (nothing is asynchronous on the CPU).
4. speculators/train/trainer.py, Trainer.__init__: self.device_type = "cuda" when there is no
   accelerator; it is only torch.autocast's device type. -> "cpu" (a real CPU autocast; with
   --hidden-states-dtype float32 a no-op either way).

The rest is flags: --num-workers 0, --loss-implementation eager (the fused losses are Triton GPU
kernels), --draft-attn-impl sdpa (DFlash's default compiles a flex-attention block mask).
"""

from __future__ import annotations

import sys
import time


def patch() -> None:
    import speculators.train.checkpointer as checkpointer
    import speculators.train.trainer as trainer

    trainer.get_local_rank = lambda: "cpu"
    checkpointer.get_current_device = lambda: "cpu"

    def mark(self, name):
        if self.enabled:
            self._marks[name] = time.perf_counter()

    def now(self):
        return time.perf_counter() if self.enabled else None

    trainer._StepTimer.mark = mark
    trainer._StepTimer.now = now

    init = trainer.Trainer.__init__

    def cpu_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self.device_type = "cpu"

    trainer.Trainer.__init__ = cpu_init


def main(argv: list[str]) -> None:
    from speculators.train.cli import main as train
    from speculators.train.config import TrainConfig

    patch()
    train(TrainConfig.resolve(argv))


if __name__ == "__main__":
    main(sys.argv[1:])
