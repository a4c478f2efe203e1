"""What lavender's Python client costs a training loop.

usage: python3 bench/python/progress.py [STEPS [REPEAT]]   (default 20000 5)

  1. progress() per call (timeit, best of R), with a float loss and with a
     tensor-like loss (detached on the call);
  2. a loop of N steps of fixed work (a sum over 400 squares, some 20 µs),
     bare, then inside a phase pinging every 10 ms against a recording
     exporter, a hung exporter (accepts, never answers) and a port that
     answers garbage, the four run in turn R times: the extra time per step
     (medians; on a busy machine the noise is of the same order);
  3. what start and end cost against the hung exporter.

Standard library only; the exporters are local stand-ins on 127.0.0.1.
Prints Markdown tables.
"""

import argparse
import os
import statistics
import sys
import time
import timeit

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))

import logging  # noqa: E402

from lavender._phase import Phase  # noqa: E402
from tests.servers import Recorder, Silent  # noqa: E402

logging.getLogger("lavender").setLevel(logging.ERROR)


class Tensor:
    """The part of a torch tensor progress() touches."""

    def __init__(self, v):
        self.v = v

    def detach(self):
        return Tensor(self.v)

    def __float__(self):
        return self.v


def work():
    return sum(i * i for i in range(400))


def loop(steps, p=None):
    """The loop's wall time and the training thread's own CPU time: the
    first is what training waits, the second is steady on a busy machine."""
    t0, c0 = time.perf_counter(), time.thread_time()
    for step in range(steps):
        work()
        if p is not None:
            p.progress(step + 1, steps, loss=0.5)
    return time.perf_counter() - t0, time.thread_time() - c0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("steps", type=int, nargs="?", default=20000)
    ap.add_argument("repeat", type=int, nargs="?", default=5)
    args = ap.parse_args()

    rec = Recorder()
    p = Phase("bench", every=3600, url=rec.url)
    p.start()
    n = 200000
    floats = min(timeit.repeat(lambda: p.progress(1200, 5000, loss=0.5), number=n, repeat=args.repeat)) / n
    t = Tensor(0.5)
    tensors = min(timeit.repeat(lambda: p.progress(1200, 5000, loss=t), number=n, repeat=args.repeat)) / n
    p.end()
    print("| progress() call | cost per call |")
    print("|---|---|")
    print("| float loss | %.2f µs |" % (floats * 1e6))
    print("| tensor-like loss (detach on the call) | %.2f µs |" % (tensors * 1e6))
    print()

    hung, garbage = Silent(), Silent(garbage=True)
    targets = (("bare loop", None), ("recording exporter", rec.url), ("hung exporter", hung.url),
               ("garbage-speaking port", garbage.url))
    times = {label: [] for label, _ in targets}
    starts = {label: [] for label, _ in targets}
    ends = {label: [] for label, _ in targets}
    for _ in range(args.repeat):
        for label, url in targets:
            if url is None:
                times[label].append(loop(args.steps))
                continue
            p = Phase("bench", every=0.01, url=url)
            t0 = time.perf_counter()
            p.start()
            starts[label].append(time.perf_counter() - t0)
            times[label].append(loop(args.steps, p))
            t0 = time.perf_counter()
            p.end()
            ends[label].append(time.perf_counter() - t0)
    def med(label, i):
        return statistics.median(t[i] for t in times[label])

    print("| %d steps of fixed work, pings every 10 ms | wall per step | extra | training thread CPU per step | extra"
          " | start | end (worst) |" % args.steps)
    print("|---|---|---|---|---|---|---|")
    for label, url in targets:
        wall, cpu = med(label, 0) / args.steps * 1e6, med(label, 1) / args.steps * 1e6
        if url is None:
            base_wall, base_cpu = wall, cpu
            print("| %s | %.1f µs | — | %.1f µs | — | — | — |" % (label, wall, cpu))
        else:
            print("| %s | %.1f µs | %+.1f µs | %.1f µs | %+.2f µs | %.1f ms | %.0f ms |" % (
                label, wall, wall - base_wall, cpu, cpu - base_cpu, statistics.median(starts[label]) * 1e3,
                max(ends[label]) * 1e3))
    rec.close()
    hung.close()
    garbage.close()


if __name__ == "__main__":
    main()
