"""The timing loop of the PyTorch peer scripts (rows_torch.py, layers_torch.py)."""
import statistics
import time


def timed(fn, reps):
    """The median of `reps` timed calls of fn, in milliseconds, after one untimed call."""
    fn()  # warm-up: allocations, first-call dispatch
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)
