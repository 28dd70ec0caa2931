#!/usr/bin/env python3
"""Whole-process benchmark: one headless turn against the mock provider, and `tern --version`.

Builds nothing itself: run `cargo build --release --bin tern --example mock_provider` first.
Wall time is measured around a direct spawn of the real binary. Peak RSS comes from GNU time
(`/usr/bin/time`, Debian package `time`) in separate runs: a child forked from Python would
report Python's own resident set as its peak, because Linux carries the pre-exec high-water
mark across exec. Reports the median (and min/max) of N runs.

    python3 benches/whole_process.py [--runs 10]
"""

import argparse
import os
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
        report('tern run "hi" (mock)', turns)
        report("tern --version", versions)
    finally:
        mock.kill()
        mock.wait()


if __name__ == "__main__":
    main()
