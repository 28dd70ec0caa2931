#!/usr/bin/env python3
"""A paste of megabytes sent from the full-screen interface, whole process in tmux: the paste
goes in as a bracketed paste (tmux `load-buffer` + `paste-buffer -p`), is sent with Enter, and
the mock's reply is waited for. Measured: tern's idle RSS before the paste, its peak RSS
(`VmHWM`) once the paste is in the composer and once the reply is on screen, and the time from Enter to the reply.

With `--second`, a first tern owns the store and the paste is sent from a second one, its
client over the owner's socket: both processes' peaks are shown.

Build first:  cargo build --release --bin tern --examples
Then:         python3 benches/large_paste.py [--mb 10] [--runs 3] [--second]
"""

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time

import tui_process as tp

REPLY = "Got it."


def paste_file(root, mb):
    """About `mb` megabytes in lines of 100 bytes, numbered so the first and last differ."""
    path = os.path.join(root, "paste.txt")
    lines = mb * 10_000
    with open(path, "w") as f:
        for i in range(lines):
            f.write(f"log line {i:09d} " + "x" * 80 + "\n")
    return path, lines


def paste(tern, path):
    subprocess.run(["tmux", "-L", tern.socket, "load-buffer", "-b", "big", path], check=True)
    subprocess.run(["tmux", "-L", tern.socket, "paste-buffer", "-p", "-d", "-b", "big"],
                   check=True)


def one_run(mb, second):
    root = tempfile.mkdtemp(prefix="tern-bench-")
    mock = tp.Mock(REPLY)
    terns = []
    try:
        project = tp.project_dir(root)
        home = os.path.join(root, "home")
        path, lines = paste_file(root, mb)
        owner = tp.Tern(home, project, mock)
        terns.append(owner)
        owner.wait_for("message tern")
        sender = owner
        if second:
            sender = tp.Tern(home, project, mock, frames="second.log")
            terns.append(sender)
            sender.wait_for("message tern")
        time.sleep(2)
        idle = {t.pid: tp.rss_mib(t.pid) for t in terns}
        paste(sender, path)
        sender.wait_for(f"[pasted {lines} lines", timeout=300)
        pasted = tp.peak_rss_mib(sender.pid)
        sender.keys("Enter")
        sent = time.time()
        answered = sender.wait_for(REPLY, timeout=300) - sent
        peaks = {t.pid: tp.peak_rss_mib(t.pid) for t in terns}
        after = {t.pid: tp.rss_mib(t.pid) for t in terns}
        return [(idle[t.pid], peaks[t.pid], after[t.pid]) for t in terns], answered, pasted
    finally:
        for tern in terns:
            tern.stop()
        mock.stop()
        shutil.rmtree(root, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=10)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--second", action="store_true",
                        help="send from a second tern, the owner's client")
    args = parser.parse_args()
    for binary in (tp.TERN, tp.MOCK):
        if not os.path.exists(binary):
            raise SystemExit(f"{binary} is missing: cargo build --release --bin tern --examples")
    names = ["owner", "second"] if args.second else ["tern"]
    runs = [one_run(args.mb, args.second) for _ in range(args.runs)]
    for figures, answered, pasted in runs:
        shown = ", ".join(
            f"{name}: idle {idle:.1f} MiB, peak {peak:.1f} MiB, after {after:.1f} MiB"
            for name, (idle, peak, after) in zip(names, figures))
        print(f"{args.mb} MB paste: {shown}; peak {pasted:.1f} MiB before Enter; "
              f"reply {answered:.2f} s after Enter")
    for i, name in enumerate(names):
        peaks = [figures[i][1] for figures, _, _ in runs]
        idles = [figures[i][0] for figures, _, _ in runs]
        print(f"median of {len(runs)}, {name}: idle {statistics.median(idles):.1f} MiB, "
              f"peak {statistics.median(peaks):.1f} MiB "
              f"(goal ≤ 3 × {args.mb} MB + idle = "
              f"{3 * args.mb * 1e6 / 2**20 + statistics.median(idles):.1f} MiB)")


if __name__ == "__main__":
    main()
