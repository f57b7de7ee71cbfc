"""One application as the artifact's simulator sees it: limits, progress and completion.

Progress is *statistical*: steps at the initial batch size, so a job that trains with a
bigger batch earns ``gain`` (:mod:`.efficiency`) per step. The validation runs record the
progress reached at the end of each epoch; epoch ``e`` ends at the smallest progress any
run recorded for it (so every run agrees the epoch is done), and a job is complete once it
finishes epoch ``max_epochs - 1``, i.e. reaches :attr:`Application.target` -- the artifact
sets no target metric for its six applications, so completion is that epoch count. Gradient
statistics hold for a whole epoch and are interpolated linearly between the two validated
batch sizes around the job's batch size, as the artifact does.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

from .efficiency import GradStats
from .traces import ApplicationTrace

GPUS_PER_NODE = 4  # the published cluster: 16 nodes x 4 GPUs

# Epochs to train and the per-GPU batch limit where the artifact sets them; other limits come
# from the traces (batch sizes: the validated ones; local batch: the measured ones).
MAX_EPOCHS = {"bert": 2, "cifar10": 100, "ncf": 10, "imagenet": 90, "deepspeech2": 80,
              "yolov3": 50}
MAX_LOCAL_BSZ = {"yolov3": 8}


@dataclass(frozen=True, slots=True)
class Application:
    """An application's limits and its training curve."""

    trace: ApplicationTrace
    max_epochs: int
    min_local_bsz: int
    max_local_bsz: int

    @classmethod
    def of(cls, trace: ApplicationTrace) -> Application:
        """The application with the artifact's limits (unknown names: every epoch run)."""
        epochs = min(len(run) for run in trace.validation.values())
        local = [s.local_bsz for s in trace.placements] or [1]
        return cls(
            trace=trace,
            max_epochs=min(MAX_EPOCHS.get(trace.name, epochs), epochs),
            min_local_bsz=min(local),
            max_local_bsz=MAX_LOCAL_BSZ.get(trace.name, max(local)),
        )

    @property
    def name(self) -> str:
        return self.trace.name

    @property
    def init_batch_size(self) -> int:
        """The batch size progress is counted in: the smallest validated."""
        return next(iter(self.trace.validation))

    @property
    def max_batch_size(self) -> int:
        return next(reversed(self.trace.validation))

    def epoch_end(self, epoch: int) -> float:
        """Progress at the end of ``epoch`` (0-based), the smallest any run recorded."""
        return min(run[epoch].progress for run in self.trace.validation.values())

    @property
    def target(self) -> float:
        """The progress that completes the job."""
        return self.epoch_end(self.max_epochs - 1)

    def epoch_at(self, progress: float) -> int:
        """The epoch a job with ``progress`` is in (``max_epochs`` once complete)."""
        ends = [self.epoch_end(e) for e in range(self.max_epochs)]
        return bisect_right(ends, progress)

    def grad_stats(self, batch_size: float, epoch: int) -> GradStats:
        """Gradient statistics during ``epoch`` at ``batch_size``, which must lie within the
        validated batch sizes."""
        sizes = list(self.trace.validation)
        if not sizes[0] <= batch_size <= sizes[-1]:
            raise ValueError(f"{self.name}: batch size {batch_size:g} is outside the "
                             f"validated {sizes[0]}..{sizes[-1]}")
        epoch = min(epoch, self.max_epochs - 1)
        hi = sizes[min(bisect_right(sizes, batch_size), len(sizes) - 1)]
        lo = sizes[max(bisect_right(sizes, batch_size) - 1, 0)]
        a, b = self.trace.validation[lo][epoch], self.trace.validation[hi][epoch]
        w = 0.0 if hi == lo else (batch_size - lo) / (hi - lo)
        return GradStats(sqr=a.grad_sqr + w * (b.grad_sqr - a.grad_sqr),
                         var=a.grad_var + w * (b.grad_var - a.grad_var))
