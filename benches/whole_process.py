#!/usr/bin/env python3
"""Whole-process benchmark: one headless turn against the mock provider, and `tern --version`.

Also: the fsyncs one `tern run "hi"` makes (counted with `strace -f -c`, when strace is
installed); the same turn through a running tern that owns the store (a line-mode `tern`
waiting on its input), wall time and peak RSS of the client; and the handover: two line-mode
terns on one store, the first (the owner) quits or is killed with SIGKILL, and the time until
the second has answered a new message.

Builds nothing itself: run `cargo build --release --bin tern --example mock_provider` first.
Wall time is measured around a direct spawn of the real binary. Peak RSS comes from GNU time
(`/usr/bin/time`, Debian package `time`) in separate runs: a child forked from Python would
report Python's own resident set as its peak, because Linux carries the pre-exec high-water
mark across exec. Reports the median (and min/max) of N runs.

    python3 benches/whole_process.py [--runs 10]
"""

import argparse
import os
import queue
import shutil
import signal
import threading
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TERN = os.path.join(ROOT, "target", "release", "tern")
MOCK = os.path.join(ROOT, "target", "release", "examples", "mock_provider")


GNU_TIME = "/usr/bin/time"


def make_project(project):
    """A small git repository with one commit and one modified file, like a real checkout:
    each turn reads its git state for the prompt."""
    os.makedirs(os.path.join(project, "src"))
    for i in range(20):
        with open(os.path.join(project, "src", f"mod{i}.rs"), "w") as f:
            f.write(f"pub fn f{i}() -> u32 {{ {i} }}\n")
    git_env = dict(os.environ, GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull)
    ident = ["-c", "user.name=bench", "-c", "user.email=bench@example.com"]
    for argv in (["init", "-q", "-b", "main"], ["add", "."], ident + ["commit", "-q", "-m", "start"]):
        subprocess.run(["git"] + argv, cwd=project, env=git_env, check=True)
    with open(os.path.join(project, "src", "mod0.rs"), "a") as f:
        f.write("// changed\n")


def run(argv, env, cwd):
    """Runs argv once, failing loudly; returns its stderr."""
    proc = subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed: {proc.stderr.decode(errors='replace')}")
    return proc.stderr.decode()


def measure(argv, env, cwd):
    """Runs argv twice; returns (wall seconds, peak RSS in KiB)."""
    start = time.perf_counter()
    run(argv, env, cwd)
    wall = time.perf_counter() - start
    stderr = run([GNU_TIME, "-f", "maxrss=%M"] + argv, env, cwd)
    rss = int(stderr.strip().splitlines()[-1].split("=")[1])
    return wall, rss


def fsyncs(env, cwd):
    """fsync + fdatasync calls of one `tern run "hi"`, or None without strace."""
    strace = shutil.which("strace")
    if strace is None:
        return None
    out = subprocess.run(
        [strace, "-f", "-c", "-e", "trace=fsync,fdatasync", TERN, "run", "hi"],
        env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=True,
    ).stderr
    total = 0
    for line in out.splitlines():
        parts = line.split()
        if parts and parts[-1] in ("fsync", "fdatasync"):
            total += int(parts[3])
    return total


class LineMode:
    """A line-mode `tern` (its input a pipe), its output lines gathered by a thread."""

    def __init__(self, env, cwd):
        self.proc = subprocess.Popen([TERN], env=env, cwd=cwd, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line)

    def say(self, text):
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()

    def wait_for(self, *texts, timeout=20):
        """Waits for a line holding one of `texts`; returns that text."""
        deadline = time.monotonic() + timeout
        seen = []
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            seen.append(line)
            for text in texts:
                if text in line:
                    return text
        sys.exit(f"a line-mode tern never said {texts!r}; it said {seen!r}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def handover(env, cwd, kill):
    """Seconds from the owner leaving (quitting, or SIGKILL) until the other tern answered."""
    owner = LineMode(env, cwd)
    owner.wait_for("tern ·")
    client = LineMode(env, cwd)
    client.wait_for("tern ·")
    client.say("hello")
    client.wait_for("Hello!")
    if kill:
        owner.proc.send_signal(signal.SIGKILL)
        owner.proc.wait()
    else:
        owner.proc.stdin.close()
        owner.proc.wait()
    left = time.perf_counter()
    # A message sent before the client saw its owner go is refused, not lost: sent again.
    while True:
        client.say("are you there?")
        if client.wait_for("Hello!", "not sent") == "Hello!":
            break
    took = time.perf_counter() - left
    client.stop()
    owner.stop()
    return took


def report(name, samples):
    walls = [w * 1000 for w, _ in samples]
    rss = [r / 1024 for _, r in samples]
    print(
        f"{name:<28} wall median {statistics.median(walls):6.1f} ms "
        f"(min {min(walls):.1f}, max {max(walls):.1f})   "
        f"max RSS median {statistics.median(rss):5.1f} MiB (min {min(rss):.1f}, max {max(rss):.1f})"
    )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    for path in (TERN, MOCK, GNU_TIME):
        if not os.path.exists(path):
            sys.exit(f"{path} is missing: cargo build --release --bin tern --example mock_provider")

    mock = subprocess.Popen([MOCK, "--port", "0", "--reply", "Hello!"], stdout=subprocess.PIPE, text=True)
    try:
        base_url = mock.stdout.readline().strip()
        with tempfile.TemporaryDirectory(prefix="tern-bench-") as home:
            project = os.path.join(home, "project")
            make_project(project)
            env = {
                "PATH": os.environ.get("PATH", ""),
                "HOME": home,
                "TERN_HOME": os.path.join(home, "tern"),
                "ANTHROPIC_API_KEY": "bench",
                "ANTHROPIC_BASE_URL": base_url,
            }
            # One warm-up run creates the database, so every measured run opens an existing one.
            measure([TERN, "run", "hi"], env, project)
            turns = [measure([TERN, "run", "hi"], env, project) for _ in range(args.runs)]
            versions = [measure([TERN, "--version"], env, project) for _ in range(args.runs)]
            synced = [fsyncs(env, project) for _ in range(3)]
            owner = LineMode(env, project)
            owner.wait_for("tern ·")
            through = [measure([TERN, "run", "hi"], env, project) for _ in range(args.runs)]
            owner.stop()
            quits = [handover(env, project, kill=False) for _ in range(args.runs)]
            kills = [handover(env, project, kill=True) for _ in range(args.runs)]
        report('tern run "hi" (mock)', turns)
        report("tern --version", versions)
        report('tern run "hi" through an owner', through)
        if synced[0] is not None:
            print(f"fsync + fdatasync in one tern run turn (alone): {synced} (goal ≤ 6)")
        for name, took in (("owner quits", quits), ("owner killed (SIGKILL)", kills)):
            ms = [t * 1000 for t in took]
            print(f"handover, {name}: the other tern answered after median "
                  f"{statistics.median(ms):.0f} ms (min {min(ms):.0f}, max {max(ms):.0f})")
    finally:
        mock.kill()
        mock.wait()


if __name__ == "__main__":
    main()
