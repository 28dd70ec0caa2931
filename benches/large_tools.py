#!/usr/bin/env python3
"""Large tool content in the interface, whole process in tmux at 120x40, the mock scripting
the model's tool calls (`--tool-call`):

- calls: 1,000 tool calls in one turn (500 `file_read`s of small files and 500 `echo`
  commands, 10 calls a response, the commands allowed once with `a`), then paging through
  the transcript (PageUp, Home, End, then the same with every tool's output opened by
  Ctrl-O): time until the answer after the last call is on screen, RSS then and at its
  peak, the slowest frame, and each key's time to a changed screen with the slowest frame
  it drew;
- line: a command printing one line of 1 MB: time from `y` to the answer, RSS, what the
  cell shows (rows on screen, collapsed and opened with Ctrl-O), the bytes the model is sent;
- pages: a 100,000-line file read in 10 pages of 10,000 lines by `file_read`
  (`offset`/`limit`): each page's time (from the mock answering one call to the request
  carrying its result), RSS, the bytes each page sends;
- glob: `**/*.txt` over a tree of 200,000 files outside the project (so allowed with `y`):
  time from `y` to the answer, the bytes sent, RSS, what the cell shows.

Build first:  cargo build --release --bin tern --examples
Then:         python3 benches/large_tools.py [--only calls|line|pages|glob] [--runs 1]
"""

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time

import tui_process as tp

DONE = "All done here."
CONFIG = "[session]\nsidecar_titles = false\nmax_rounds = 1000\n"


class Setup:
    """A home, a project and a mock scripted with `calls` (name, arguments), then DONE."""

    def __init__(self, root, calls, repeat=1, per_reply=1):
        self.root = root
        self.home = os.path.join(root, "home")
        os.makedirs(self.home)
        with open(os.path.join(self.home, "config.toml"), "w") as f:
            f.write(CONFIG)
        self.project = tp.project_dir(root)
        self.timings = os.path.join(root, "timings.log")
        self.sizes = os.path.join(root, "sizes.log")
        extra = ["--timings", self.timings, "--sizes", self.sizes,
                 "--repeat-calls", str(repeat), "--calls-per-reply", str(per_reply)]
        for name, args in calls:
            extra += ["--tool-call", name, json.dumps(args)]
        self.calls = calls
        self.extra = extra
        self.mock = None
        self.tern = None

    def start(self):
        self.mock = tp.Mock(DONE, extra=self.extra)
        self.tern = tp.Tern(self.home, self.project, self.mock, size=(120, 40))
        self.tern.wait_for("message tern")
        time.sleep(1)
        return self.tern

    def send(self, text):
        self.tern.keys("-l", text)
        self.tern.keys("Enter")
        return time.time()

    def answered(self):
        """(µs taken up, µs answered) of each model request."""
        with open(self.timings) as f:
            return [(int(p[0]), int(p[1])) for p in (line.split() for line in f)
                    if len(p) == 3 and p[2] == "/v1/messages"]

    def request_sizes(self):
        """(body bytes, latest tool results' bytes) of each model request."""
        with open(self.sizes) as f:
            return [tuple(int(v) for v in line.split()) for line in f if line.strip()]

    def slowest_frame_ms(self, since):
        frames = [taken for at, taken in self.tern.frame_log() if at / 1e6 >= since]
        return max(frames, default=0) / 1e3

    def stop(self):
        if self.tern:
            self.tern.stop()
        if self.mock:
            self.mock.stop()


def key_response(setup, key):
    """Sends `key` and waits for the screen to change; the seconds that took, and the
    slowest frame drawn meanwhile."""
    tern = setup.tern
    before = tern.screen()
    sent = time.time()
    tern.keys(key)
    deadline = sent + 10
    while time.time() < deadline:
        if tern.screen() != before:
            break
        time.sleep(0.005)
    took = time.time() - sent
    time.sleep(0.1)
    return took, setup.slowest_frame_ms(sent)


def calls_case(root):
    calls = [("file_read", {"path": "files/f{n}.txt"}),
             ("shell_execute", {"command": "echo call {n}"})]
    setup = Setup(root, calls, repeat=500, per_reply=10)
    files = os.path.join(setup.project, "files")
    os.makedirs(files)
    for n in range(500):
        with open(os.path.join(files, f"f{n}.txt"), "w") as f:
            f.write(f"file {n}\n" * 5)
    tern = setup.start()
    try:
        sent = setup.send("read them all")
        tern.wait_for("always", timeout=60)
        tern.keys("a")
        done = tern.wait_for(DONE, timeout=600) - sent
        rss = tp.rss_mib(tern.pid)
        peak = tp.peak_rss_mib(tern.pid)
        slowest = setup.slowest_frame_ms(sent)
        keys = {}
        top = False
        sequence = ["PageUp"] * 5 + ["Home", "End", "C-o", "Home", "End", "C-o"]
        for i, key in enumerate(sequence):
            took, frame = key_response(setup, key)
            keys[f"{key}{i + 1}"] = (took * 1e3, frame)
            if key == "Home":
                top = "read them all" in tern.screen()
        after = tp.rss_mib(tern.pid)
        n_requests = len(setup.answered())
        return {"done_s": done, "rss": rss, "peak": peak, "slowest_ms": slowest,
                "keys": keys, "rss_after_keys": after, "requests": n_requests,
                "top": top}
    finally:
        setup.stop()


def rows_of(screen, char="a", run=50):
    """Rows of the screen holding a run of `char`."""
    return sum(1 for line in screen.splitlines() if char * run in line)


def line_case(root):
    command = "head -c 1000000 /dev/zero | tr '\\0' a; echo"
    setup = Setup(root, [("shell_execute", {"command": command})])
    tern = setup.start()
    try:
        setup.send("print a long line")
        tern.wait_for("yes, once", timeout=60)
        approved = time.time()
        tern.keys("y")
        done = tern.wait_for(DONE, timeout=120) - approved
        time.sleep(0.5)
        rss = tp.rss_mib(tern.pid)
        peak = tp.peak_rss_mib(tern.pid)
        collapsed = rows_of(tern.screen())
        slowest = setup.slowest_frame_ms(approved)
        opened_at = time.time()
        tern.keys("C-o")
        time.sleep(1)
        opened = rows_of(tern.screen())
        open_frame = setup.slowest_frame_ms(opened_at)
        peak_open = tp.peak_rss_mib(tern.pid)
        sent = setup.request_sizes()[-1]
        return {"done_ms": done * 1e3, "rss": rss, "peak": peak, "rows": collapsed,
                "rows_open": opened, "slowest_ms": slowest, "open_frame_ms": open_frame,
                "peak_open": peak_open, "request": sent[0], "result": sent[1]}
    finally:
        setup.stop()


def pages_case(root):
    pages, per_page = 10, 10_000
    calls = [("file_read", {"path": "big.txt", "offset": 1 + i * per_page, "limit": per_page})
             for i in range(pages)]
    setup = Setup(root, calls)
    with open(os.path.join(setup.project, "big.txt"), "w") as f:
        for n in range(pages * per_page):
            f.write(f"line {n}: some text of a generated file, about sixty bytes\n")
    tern = setup.start()
    try:
        sent = setup.send("read the big file")
        done = tern.wait_for(DONE, timeout=300) - sent
        time.sleep(0.5)
        rss = tp.rss_mib(tern.pid)
        peak = tp.peak_rss_mib(tern.pid)
        answered = setup.answered()
        # A page's time: from the mock's answer holding the call to the next request's arrival.
        per = [(answered[i + 1][0] - answered[i][1]) / 1e3 for i in range(len(answered) - 1)]
        sizes = setup.request_sizes()
        return {"done_s": done, "rss": rss, "peak": peak, "page_ms": per,
                "results": [s[1] for s in sizes[1:]], "requests": [s[0] for s in sizes],
                "slowest_ms": setup.slowest_frame_ms(sent)}
    finally:
        setup.stop()


def make_tree(path, files=200_000, per_dir=1000):
    for d in range(files // per_dir):
        folder = os.path.join(path, f"d{d:03}")
        os.makedirs(folder)
        for n in range(per_dir):
            open(os.path.join(folder, f"file_{n:04}.txt"), "w").close()


def glob_case(root, tree):
    setup = Setup(root, [("glob", {"pattern": "**/*.txt", "path": tree})])
    tern = setup.start()
    try:
        setup.send("find the text files")
        tern.wait_for("yes, once", timeout=60)
        approved = time.time()
        tern.keys("y")
        done = tern.wait_for(DONE, timeout=300) - approved
        time.sleep(0.5)
        screen = tern.screen()
        rss = tp.rss_mib(tern.pid)
        peak = tp.peak_rss_mib(tern.pid)
        answered = setup.answered()
        tool_ms = (answered[1][0] - answered[0][1]) / 1e3
        sizes = setup.request_sizes()
        shown = sum(1 for line in screen.splitlines() if "file_" in line)
        return {"done_ms": done * 1e3, "tool_ms": tool_ms, "rss": rss, "peak": peak,
                "result": sizes[-1][1], "rows": shown,
                "slowest_ms": setup.slowest_frame_ms(approved)}
    finally:
        setup.stop()


def report(name, runs):
    for run in runs:
        print(f"{name}: " + ", ".join(f"{k} {fmt(v)}" for k, v in run.items()))
    if len(runs) > 1:
        keys = [k for k, v in runs[0].items() if isinstance(v, (int, float))]
        print(f"{name} median of {len(runs)}: "
              + ", ".join(f"{k} {fmt(statistics.median(r[k] for r in runs))}" for k in keys))


def fmt(value):
    if isinstance(value, float):
        return f"{value:.1f}"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {fmt(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(fmt(v) for v in value) + "]"
    return str(value)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--only", choices=["calls", "line", "pages", "glob"])
    args = parser.parse_args()
    for binary in (tp.TERN, tp.MOCK):
        if not os.path.exists(binary):
            raise SystemExit(f"{binary} is missing: cargo build --release --bin tern --examples")
    cases = [args.only] if args.only else ["calls", "line", "pages", "glob"]
    shared = tempfile.mkdtemp(prefix="tern-bench-tree-")
    try:
        tree = None
        for case in cases:
            runs = []
            for _ in range(args.runs):
                root = tempfile.mkdtemp(prefix="tern-bench-")
                try:
                    if case == "calls":
                        runs.append(calls_case(root))
                    elif case == "line":
                        runs.append(line_case(root))
                    elif case == "pages":
                        runs.append(pages_case(root))
                    else:
                        if tree is None:
                            tree = os.path.join(shared, "tree")
                            make_tree(tree)
                        runs.append(glob_case(root, tree))
                finally:
                    shutil.rmtree(root, ignore_errors=True)
            report(case, runs)
    finally:
        shutil.rmtree(shared, ignore_errors=True)


if __name__ == "__main__":
    main()
