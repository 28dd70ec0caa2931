#!/usr/bin/env python3
"""A model writes a file of megabytes, whole process in tmux: the time from the message's Enter
to the approval box on screen (the request, the mock streaming the call, its preview and the
frame), from `y` to the turn's answer on screen, the slowest frame meanwhile (from
`TERN_FRAME_LOG`) and tern's RSS with the box up.

Build first:  cargo build --release --bin tern --examples
Then:         python3 benches/large_write.py [--bytes 5000000] [--runs 5]
"""

import argparse
import os
import statistics
import tempfile
import time

import tui_process as tp


def one_run(size):
    root = tempfile.mkdtemp()
    home = os.path.join(root, "home")
    os.makedirs(home)
    project = tp.project_dir(root)
    mock = tp.Mock("Written.", extra=["--write-bytes", str(size)])
    tern = tp.Tern(home, project, mock, size=(120, 40))
    try:
        tern.first_frame_ms()
        tern.keys("-l", "write it")
        tern.keys("Enter")
        sent = time.time()
        box = tern.wait_for("y   yes, once", timeout=120) - sent
        rss = tp.rss_mib(tern.pid)
        tern.keys("y")
        answered = time.time()
        done = tern.wait_for("Written.", timeout=120) - answered
        slowest = max(taken for _, taken in tern.frame_log())
        written = os.path.getsize(os.path.join(project, "big.txt"))
        return box, done, slowest / 1e3, rss, written
    finally:
        tern.stop()
        mock.stop()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bytes", type=int, default=5_000_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    for binary in (tp.TERN, tp.MOCK):
        if not os.path.exists(binary):
            raise SystemExit(f"{binary} is missing: cargo build --release --bin tern --examples")
    runs = [one_run(args.bytes) for _ in range(args.runs)]
    for box, done, slowest, rss, written in runs:
        print(f"box {box * 1e3:.0f} ms, done after y {done * 1e3:.0f} ms, "
              f"slowest frame {slowest:.1f} ms, RSS {rss:.1f} MiB, written {written} bytes")
    median = lambda values: statistics.median(values)
    print(f"median of {len(runs)}: box {median([r[0] for r in runs]) * 1e3:.0f} ms, "
          f"done after y {median([r[1] for r in runs]) * 1e3:.0f} ms, "
          f"slowest frame {median([r[2] for r in runs]):.1f} ms, "
          f"RSS {median([r[3] for r in runs]):.1f} MiB")


if __name__ == "__main__":
    main()
