"""The timing loop of the PyTorch peer scripts (rows_torch.py, layers_torch.py)."""
import statistics
import time


def timed(fn, reps, clock=time.perf_counter):
    """The median of `reps` timed calls of fn, in milliseconds, after one untimed call.
    clock: time.perf_counter (wall) or time.thread_time (this thread's CPU time: with one
    PyTorch thread every kernel runs on the calling thread, so on a loaded machine it leaves
    out the time the thread waited for the core)."""
    fn()  # warm-up: allocations, first-call dispatch
    times = []
    for _ in range(reps):
        t0 = clock()
        fn()
        times.append((clock() - t0) * 1e3)
    return statistics.median(times)
