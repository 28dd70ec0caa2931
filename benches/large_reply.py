#!/usr/bin/env python3
"""A reply of about 110 KB (under the 128 KiB a message may keep) in awkward shapes streamed into the interface, whole process in
tmux at 120x40: a table of 200 columns, a code block of 5,000 lines, a list nested 50 deep, a
URL of 10,000 characters and a heading of 2,000. Measured: tern's RSS idle, its peak (`VmHWM`)
while the reply streams and is on screen, its RSS once the turn has ended, and again once
short exchanges have pushed the reply out of view; the time the reply took to show whole. A
short exchange with a small code block comes first, so what any conversation with code loads
(the highlighter's syntax definitions) is in a figure the reply is measured against as well
as the idle one. Last, Home scrolls back to
the reply: the time until it shows and the slowest frame drawn meanwhile.

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
# Short exchanges, the first before the reply and the rest after it, enough to push its last lines off a 40-row screen.
PINGS = 13
# Each short answer ends in a small code block, so each loads what any code block needs (the
# highlighter's syntax definitions and Rust's compiled patterns, about 7 MiB, let go when its
# turn ends and compiled again when the next turn starts).
PONG_CODE = "\n\n```rust\nlet answer = 42;\n```\n"


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


def ask(tern, text, expect, timeout=60):
    tern.keys("-l", text)
    tern.keys("Enter")
    return tern.wait_for(expect, timeout=timeout)


def one_run(root):
    path = os.path.join(root, "reply.md")
    with open(path, "w") as f:
        f.write(reply_text())
    size = os.path.getsize(path)
    mock = tp.Mock("", extra=["--reply-file", path, "--pings", str(PINGS),
                              "--pong-extra", PONG_CODE])
    home = os.path.join(root, "home")
    project = tp.project_dir(root)
    tern = tp.Tern(home, project, mock, size=(120, 40))
    try:
        tern.wait_for("message tern")
        time.sleep(2)
        idle = tp.rss_mib(tern.pid)
        # One short exchange first: what any conversation loads (the highlighter's syntaxes,
        # the first request's client) is in the figure the reply is measured against.
        ask(tern, "PING 1", "PONG-1")
        time.sleep(2)
        talked = tp.rss_mib(tern.pid)
        sent = time.time()
        shown = ask(tern, "show me", END, timeout=120) - sent
        time.sleep(1)
        peak = tp.peak_rss_mib(tern.pid)
        ended = tp.rss_mib(tern.pid)
        # Short exchanges push the reply out of view.
        for n in range(2, PINGS + 1):
            ask(tern, f"PING {n}", f"PONG-{n}")
        time.sleep(2)
        later = tp.rss_mib(tern.pid)
        # Back to the top: the reply, let go, is laid out again.
        home_at = time.time()
        tern.keys("Home")
        back = tern.wait_for("r0v0", timeout=30) - home_at
        slowest = max((taken for at, taken in tern.frame_log() if at / 1e6 >= home_at),
                      default=0) / 1e3
        return size, idle, talked, peak, ended, later, shown, back, slowest
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
    for size, idle, talked, peak, ended, later, shown, back, slowest in runs:
        print(f"reply {size / 1e3:.0f} KB: idle {idle:.1f} MiB, after a short exchange "
              f"{talked:.1f}, peak {peak:.1f} MiB, turn ended {ended:.1f} MiB, out of view "
              f"{later:.1f} MiB; whole on screen after {shown:.2f} s; back in view after "
              f"Home {back * 1e3:.0f} ms, slowest frame {slowest:.0f} ms")
    med = lambda i: statistics.median(r[i] for r in runs)
    print(f"median of {len(runs)}: idle {med(1):.1f}, talked {med(2):.1f}, peak {med(3):.1f}, "
          f"ended {med(4):.1f}, out of view {med(5):.1f} MiB")


if __name__ == "__main__":
    main()
