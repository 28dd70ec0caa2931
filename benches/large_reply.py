#!/usr/bin/env python3
"""A reply of about 110 KB (under the 128 KiB a message may keep) in awkward shapes streamed into the interface, whole process in
tmux at 120x40: a table of 200 columns, a code block of 5,000 lines, a list nested 50 deep, a
URL of 10,000 characters and a heading of 2,000. Measured: tern's RSS idle, its peak (`VmHWM`)
while the reply streams and is on screen, its RSS once the turn has ended, and again once a
later answer has pushed the reply out of view; the time the reply took to show whole.

Build first:  cargo build --release --bin tern --examples
Then:         python3 benches/large_reply.py [--runs 3]
"""

import argparse
import os
import shutil
import statistics
import tempfile
import time

import tui_process as tp

END = "END-OF-REPLY"


def reply_text():
    header = "| " + " | ".join(f"c{i}" for i in range(200)) + " |"
    rule = "|" + "---|" * 200
    rows = ["| " + " | ".join(f"r{r}v{i}" for i in range(200)) + " |" for r in range(5)]
    code = ["```rust"] + [f"let v{i} = {i};" for i in range(5000)] + ["```"]
    nested = [("  " * depth) + f"- level {depth}" for depth in range(50)]
    url = "https://example.com/" + "a" * 10_000
    heading = "# " + "long heading " * 154
    parts = [heading, "", *[header, rule, *rows], "", *code, "", *nested, "", url, "", END]
    return "\n".join(parts)[:127_000] + "\n" + END


def one_run(root):
    path = os.path.join(root, "reply.md")
    with open(path, "w") as f:
        f.write(reply_text())
    size = os.path.getsize(path)
    mock = tp.Mock("", extra=["--reply-file", path])
    home = os.path.join(root, "home")
    project = tp.project_dir(root)
    tern = tp.Tern(home, project, mock, size=(120, 40))
    try:
        tern.wait_for("message tern")
        time.sleep(2)
        idle = tp.rss_mib(tern.pid)
        tern.keys("-l", "show me")
        tern.keys("Enter")
        sent = time.time()
        shown = tern.wait_for(END, timeout=120) - sent
        time.sleep(1)
        peak = tp.peak_rss_mib(tern.pid)
        ended = tp.rss_mib(tern.pid)
        # Later answers push the reply out of view (each is the same reply: its end is what
        # shows; the first one is what is measured against).
        tern.keys("-l", "again")
        tern.keys("Enter")
        time.sleep(3)
        later = tp.rss_mib(tern.pid)
        return size, idle, peak, ended, later, shown
    finally:
        tern.stop()
        mock.stop()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    for binary in (tp.TERN, tp.MOCK):
        if not os.path.exists(binary):
            raise SystemExit(f"{binary} is missing: cargo build --release --bin tern --examples")
    runs = []
    for _ in range(args.runs):
        root = tempfile.mkdtemp(prefix="tern-bench-")
        try:
            runs.append(one_run(root))
        finally:
            shutil.rmtree(root, ignore_errors=True)
    for size, idle, peak, ended, later, shown in runs:
        print(f"reply {size / 1e3:.0f} KB: idle {idle:.1f} MiB, peak {peak:.1f} MiB, "
              f"turn ended {ended:.1f} MiB, after a second such reply {later:.1f} MiB; "
              f"whole on screen after {shown:.2f} s")
    med = lambda i: statistics.median(r[i] for r in runs)
    print(f"median of {len(runs)}: idle {med(1):.1f}, peak {med(2):.1f}, "
          f"ended {med(3):.1f}, later {med(4):.1f} MiB")


if __name__ == "__main__":
    main()
