#!/usr/bin/env python3
"""A reply streamed as one long paragraph, measured on the whole tern process in tmux.

The mock streams "word0 word1 …" (60,000 words, no line break) at 2,000 words a second; the
script reports tern's CPU time over the stream as a share of one core, the frames drawn per
second, and whether the last word reached the screen. A paragraph laid out again whole on
every frame costs more the longer it gets; laid out as it grows, the cost stays that of the
words arriving.

Build first:  cargo build --release --bin tern --examples
Then:         python3 benches/long_paragraph.py [--words 60000] [--code-lines N] [--runs 1]
TERN_BENCH_TARGET names another target directory (default: target/ beside this script).
"""

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tui_process  # noqa: E402  (the classes that drive tern and the mock)


def use_target(target):
    tui_process.TERN = os.path.join(target, "release/tern")
    tui_process.MOCK = os.path.join(target, "release/examples/mock_provider")


def one_run(words, code_lines):
    # 500 µs between events, one word an event: 2,000 words a second.
    if code_lines:
        code = "".join(f"let x{n} = {n};\n" for n in range(code_lines))
        mock = tui_process.Mock(f"```rust\n{code}```", between_us=500)
        last = f"x{code_lines - 1} ="
        words = 4 * code_lines
    else:
        mock = tui_process.Mock("", between_us=500, words=words)
        last = f"word{words - 1}"
    root = tempfile.mkdtemp(prefix="tern-bench-")
    try:
        project = tui_process.project_dir(root)
        tern = tui_process.Tern(os.path.join(root, "home"), project, mock)
        try:
            tern.wait_for("message tern")
            before_cpu = tui_process.cpu_seconds(tern.pid)
            start = time.time()
            tern.keys("-l", "stream please")
            tern.keys("Enter")
            tern.wait_for(last, timeout=words / 100 + 60)
            tern.wait_for("ready ·", timeout=60)
            elapsed = time.time() - start
            cpu = tui_process.cpu_seconds(tern.pid) - before_cpu
            frames, busiest = tui_process.frames_between(tern, start, elapsed)
            return elapsed, cpu, len(frames) / elapsed, busiest
        finally:
            tern.stop()
    finally:
        mock.stop()
        shutil.rmtree(root, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--words", type=int, default=60_000)
    parser.add_argument("--code-lines", type=int, default=0)
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    use_target(os.environ.get("TERN_BENCH_TARGET", os.path.join(root, "target")))
    for binary in (tui_process.TERN, tui_process.MOCK):
        if not os.path.exists(binary):
            raise SystemExit(f"{binary} is missing: cargo build --release --bin tern --examples")
    shares = []
    for _ in range(args.runs):
        elapsed, cpu, fps, busiest = one_run(args.words, args.code_lines)
        shares.append(100 * cpu / elapsed)
        what = (f"a code block of {args.code_lines:,} lines" if args.code_lines
                else f"{args.words:,} words as one paragraph")
        print(f"{what} at 2,000 words/s: {elapsed:.1f} s, tern CPU "
              f"{cpu:.2f} s ({shares[-1]:.0f}% of one core), {fps:.0f} frames/s on average, "
              f"{busiest} in the busiest second")
    print(f"median {statistics.median(shares):.0f}% of one core over {args.runs} run(s); "
          f"goal ≤ 15%")


if __name__ == "__main__":
    main()
