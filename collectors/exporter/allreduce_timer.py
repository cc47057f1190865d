"""Timing a synchronous step's all-reduce apart from its compute (used by the exporter's sync mode).

What is measured is the *exposed* all-reduce: the time a rank waits for reduced gradients after its
own backward pass has produced the last of them. Communication hidden behind backward (DDP launches
each gradient bucket's all-reduce while backward goes on) costs no step time and is not counted.

- **DDP** (``register_comm_hook``): each bucket's all-reduce is launched by :meth:`AllreduceTimer.ddp_hook`
  (the default all-reduce, unchanged) and stamped when launched and when done. Backward has produced every
  gradient when the last bucket is launched, so exposed = last completion − last launch (0 when every
  bucket was reduced before backward ended).
- **Horovod** or any explicit wait (``optimizer.synchronize()``): :meth:`AllreduceTimer.waiting` times
  the wait itself, which is all exposed.

:meth:`AllreduceTimer.take` returns (and clears) what one step accumulated. Thread-safe: DDP runs the
completion callbacks on the communication thread. torch is imported only inside the DDP hook.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


class AllreduceTimer:
    """Exposed all-reduce seconds of the current step, from DDP bucket stamps or explicit waits."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._last_launch = 0.0
        self._last_done = 0.0
        self._waited = 0.0
        self._buckets = 0

    def launched(self) -> float:
        """Stamp a bucket's launch; returns the stamp."""
        t = self._clock()
        with self._lock:
            self._last_launch = max(self._last_launch, t)
            self._buckets += 1
        return t

    def done(self) -> None:
        """Stamp a bucket's completion (any thread)."""
        t = self._clock()
        with self._lock:
            self._last_done = max(self._last_done, t)

    @contextmanager
    def waiting(self) -> Iterator[None]:
        """Time an explicit wait for reduced gradients (Horovod's ``optimizer.synchronize()``)."""
        t0 = self._clock()
        try:
            yield
        finally:
            with self._lock:
                self._waited += self._clock() - t0

    def take(self) -> float:
        """The step's exposed all-reduce seconds (bucket tail + explicit waits); resets for the next step."""
        with self._lock:
            tail = max(0.0, self._last_done - self._last_launch) if self._buckets else 0.0
            out = tail + self._waited
            self._last_launch = self._last_done = self._waited = 0.0
            self._buckets = 0
        return out

    def ddp_hook(self) -> Callable[[Any, Any], Any]:
        """A DDP communication hook: PyTorch's default all-reduce of each bucket, stamped.
        ``model.register_comm_hook(None, timer.ddp_hook())``."""
        import torch
        import torch.distributed as dist
        from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

        def hook(state: Any, bucket: Any) -> Any:
            self.launched()

            def finished(fut: Any) -> Any:
                self.done()
                return fut.value()

            return allreduce_hook(state, bucket).then(finished)

        # DDP checks a hook's annotations as objects (this module's are strings)
        hook.__annotations__ = {
            "state": object,
            "bucket": dist.GradBucket,
            "return": torch.futures.Future[torch.Tensor],
        }
        return hook
