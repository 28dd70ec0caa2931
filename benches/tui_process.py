#!/usr/bin/env python3
"""Whole-process measurements of tern's terminal interface, in a real terminal (tmux).

- first frame: from launching `tern` to its first frame drawn (the frame log's first line),
  and the process's RSS 10 s after start, idle;
- a second terminal: the same for a `tern` started while another one owns the store (it
  works as that one's client);
- streaming: a 4,000-word reply streamed by the mock at 2,000 words a second: CPU time of
  the tern process over the stream, frames drawn per second, and whether every word arrived
  (the transcript exported with /export compared with what the mock sent);
- eight subagents: one message has the model send 8 subagents at once; each streams 2,000
  words at 2,000 a second into its pane while the main session streams its own answer, and
  then each run's notice starts a turn that streams again: CPU time and peak RSS of the tern
  process from the message until every run has reported and tern is ready, frames per
  second, and whether every word arrived (the main transcript exported, each run's
  `result.md`);
- first token beside subagents: the time from sending a message to the first word of its
  answer on screen, in a tern with nothing else to do and then, in the same tern, while 8
  subagents stream 2,000 words a second each into their panes (15 messages each, medians); and
  tern's own share of it: from taking the message from the composer to that frame, less the
  time the mock took from accepting the request's connection to writing its answer (tmux and the mock share
  the machine's two cores with tern, and slow down beside 8 streams themselves; the mock,
  standing for a provider's servers, runs 10 nice steps lower and on 2 threads);
- a 10,000-message session opened with `tern -r ID`: first frame, RSS, and the time each
  frame takes while paging through the middle of it (from the frame log);
- typed bursts: 5,000 and 100,000 characters written to the terminal at once, not as a
  bracketed paste: the time until the composer shows the last of them, and whether the
  message sent holds every one;
- the picker (`tern -r`) over 100,000 sessions (the database `cargo bench --bench picker`
  builds): first frame, RSS with it open, and the time from typing a query that matches one
  session 90,000 deep until its row is on screen.

Build first:  cargo build --release --bin tern --examples
Then:         python3 benches/tui_process.py [--runs 5] [--only subagents]
Needs tmux. Frame times come from TERN_FRAME_LOG, which tern writes one line per frame to.
"""

import argparse
import glob
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TERN = os.path.join(ROOT, "target/release/tern")
MOCK = os.path.join(ROOT, "target/release/examples/mock_provider")
SEED = os.path.join(ROOT, "target/release/examples/seed_session")
CLK_TCK = os.sysconf("SC_CLK_TCK")


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def peak_rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


class Mock:
    def __init__(self, reply, between_us=0, subagents=0, pings=0, words=0, timings=None,
                 nice=0, extra=()):
        """`nice`: how much lower the mock runs than the processes measured: it stands for a
        provider's servers, whose streaming to other clients takes no core of the user's."""
        text = ["--words", str(words)] if words else ["--reply", reply]
        timed = ["--timings", timings] if timings else []
        niced = ["nice", "-n", str(nice)] if nice else []
        self.timings = timings
        self.proc = subprocess.Popen(
            [*niced, MOCK, *text, "--between-us", str(between_us), "--subagents", str(subagents),
             "--pings", str(pings), *timed, *extra],
            stdout=subprocess.PIPE,
            text=True,
        )
        self.url = self.proc.stdout.readline().strip()

    def answered(self):
        """(µs when taken up, µs when answered) of each model request answered so far."""
        with open(self.timings) as f:
            return [(int(p[0]), int(p[1])) for p in (line.split() for line in f)
                    if len(p) == 3 and p[2] == "/v1/messages"]

    def stop(self):
        self.proc.kill()
        self.proc.wait()


class Tern:
    """tern in a tmux window of its own server."""

    def __init__(self, home, project, mock, args=(), size=(120, 40), frames="frames.log"):
        self.socket = f"tern-bench-{os.getpid()}-{time.monotonic_ns()}"
        self.frames = os.path.join(home, frames)
        if os.path.exists(self.frames):
            os.remove(self.frames)
        env = {
            "TERN_HOME": home,
            "ANTHROPIC_API_KEY": "bench",
            "ANTHROPIC_BASE_URL": mock.url,
            "TERN_FRAME_LOG": self.frames,
            "TERM": "xterm-256color",
        }
        command = ["tmux", "-L", self.socket, "-f", "/dev/null", "new-session", "-d",
                   "-x", str(size[0]), "-y", str(size[1]), "-c", project]
        for name, value in env.items():
            command += ["-e", f"{name}={value}"]
        self.started = time.time()
        subprocess.run(command + [" ".join([TERN, *args])], check=True)
        out = subprocess.run(["tmux", "-L", self.socket, "list-panes", "-F", "#{pane_pid}"],
                             capture_output=True, text=True, check=True)
        self.pid = int(out.stdout.split()[0])

    def keys(self, *keys):
        subprocess.run(["tmux", "-L", self.socket, "send-keys", *keys], check=True)

    def screen(self):
        return subprocess.run(["tmux", "-L", self.socket, "capture-pane", "-p", "-J"],
                              capture_output=True, text=True).stdout

    def wait_for(self, text, timeout=60):
        """Until the screen shows `text`; the time it was seen."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            if text in self.screen():
                return time.time()
            time.sleep(0.02)
        raise RuntimeError(f"never saw {text!r}:\n{self.screen()}")

    def wait_until(self, done, timeout=60):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if done(self.screen()):
                return
            time.sleep(0.02)
        raise RuntimeError(f"never saw what was waited for:\n{self.screen()}")

    def wait_for_streaming(self, beyond, timeout=60):
        """Until some pane shows a word numbered past `beyond` (a pane's tail moves on too
        fast for any one word to be sure to be seen)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            if any(int(n) > beyond for n in re.findall(r"\bword(\d+)\b", self.screen())):
                return
            time.sleep(0.02)
        raise RuntimeError(f"never saw a word past word{beyond}:\n{self.screen()}")

    def frame_log(self):
        """(wall-clock µs when written, µs taken) per frame."""
        return [frame[:2] for frame in self.marked_frames()]

    def log_lines(self):
        try:
            with open(self.frames) as f:
                return [line.split() for line in f]
        except FileNotFoundError:
            return []

    def marked_frames(self):
        """(wall-clock µs, µs taken, whether it shows the first word of an answer)."""
        return [(int(p[0]), int(p[1]), p[2:] == ["answer"])
                for p in self.log_lines() if len(p) >= 2 and p[1].isdigit()]

    def inputs(self):
        """Wall-clock µs of each message sent, as tern took it from the composer."""
        return [int(p[0]) for p in self.log_lines() if p[1:] == ["input"]]

    def requests(self):
        """Wall-clock µs of each request to a model, as tern handed it to its HTTP client."""
        return [int(p[0]) for p in self.log_lines() if p[1:] == ["request"]]

    def first_frame_ms(self, timeout=10):
        deadline = time.time() + timeout
        while time.time() < deadline:
            log = self.frame_log()
            if log:
                return log[0][0] / 1e3 - self.started * 1e3
            time.sleep(0.002)
        raise RuntimeError("no frame drawn")

    def stop(self):
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True)


def frames_between(tern, start, elapsed):
    """The frames drawn from `start` (seconds) for `elapsed` seconds, and how many the
    busiest second of them held."""
    frames = [at for at, _ in tern.frame_log() if start <= at / 1e6 <= start + elapsed]
    busiest = 0
    for at in frames:
        busiest = max(busiest, sum(1 for other in frames if at <= other < at + 1_000_000))
    return frames, busiest


def exported_transcript(tern, root):
    """The transcript as `/export` writes it."""
    export = os.path.join(root, "out.md")
    tern.keys("-l", f"/export {export}")
    tern.keys("Enter")
    deadline = time.time() + 10
    while not os.path.exists(export) and time.time() < deadline:
        time.sleep(0.05)
    with open(export) as f:
        return f.read()


def project_dir(root):
    project = os.path.join(root, "project")
    os.makedirs(project)
    subprocess.run(["git", "init", "-q", project], check=True)
    with open(os.path.join(project, "README.md"), "w") as f:
        f.write("# demo\n")
    return project


def first_frame_and_idle(runs):
    mock = Mock("Hello!")
    firsts, rss = [], []
    for i in range(runs):
        root = tempfile.mkdtemp(prefix="tern-bench-")
        try:
            project = project_dir(root)
            tern = Tern(os.path.join(root, "home"), project, mock)
            firsts.append(tern.first_frame_ms())
            if i == 0:
                time.sleep(10)
                rss.append(rss_mib(tern.pid))
            tern.stop()
        finally:
            shutil.rmtree(root, ignore_errors=True)
    mock.stop()
    print(f"first frame: median {statistics.median(firsts):.1f} ms over {runs} runs "
          f"(min {min(firsts):.1f}, max {max(firsts):.1f}); goal ≤ 50 ms")
    print(f"idle RSS 10 s after start: {rss[0]:.1f} MiB; goal ≤ 25 MiB")


def second_terminal(runs):
    """A second `tern` on the store a first one owns: it is the first one's client."""
    mock = Mock("Hello!")
    firsts, rss = [], []
    root = tempfile.mkdtemp(prefix="tern-bench-")
    try:
        project = project_dir(root)
        home = os.path.join(root, "home")
        owner = Tern(home, project, mock)
        owner.wait_for("message tern")
        for i in range(runs):
            second = Tern(home, project, mock, frames=f"second-{i}.log")
            firsts.append(second.first_frame_ms())
            if i == 0:
                time.sleep(10)
                rss.append(rss_mib(second.pid))
            second.stop()
        owner.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    mock.stop()
    print(f"second terminal beside a running one: first frame median "
          f"{statistics.median(firsts):.1f} ms over {runs} runs (min {min(firsts):.1f}, "
          f"max {max(firsts):.1f}); goal ≤ 50 ms")
    print(f"second terminal's idle RSS 10 s after start: {rss[0]:.1f} MiB; goal ≤ 25 MiB")


def streaming():
    words = [f"word{i}" for i in range(4000)]
    reply = " ".join(words)
    mock = Mock(reply, between_us=500)
    root = tempfile.mkdtemp(prefix="tern-bench-")
    try:
        project = project_dir(root)
        tern = Tern(os.path.join(root, "home"), project, mock)
        tern.wait_for("message tern")
        before_cpu = cpu_seconds(tern.pid)
        start = time.time()
        tern.keys("-l", "stream please")
        tern.keys("Enter")
        tern.wait_for("word3999", timeout=60)
        tern.wait_for("ready ·", timeout=60)
        elapsed = time.time() - start
        cpu = cpu_seconds(tern.pid) - before_cpu
        frames, busiest = frames_between(tern, start, elapsed)
        fps = len(frames) / elapsed
        exported = exported_transcript(tern, root)
        complete = reply in exported
        tern.stop()
        print(f"streaming 4,000 words at 2,000/s: {elapsed:.2f} s, tern CPU {cpu:.2f} s "
              f"({100 * cpu / elapsed:.0f}% of one core), {fps:.0f} frames/s on average, "
              f"{busiest} in the busiest second (cap 60); every word arrived: {complete}")
    finally:
        mock.stop()
        shutil.rmtree(root, ignore_errors=True)


# The end of a typed burst, found on screen across the composer's rows.
BURST_END = "ENDOFBURST"


def typed_burst(runs):
    """Keys written to the terminal in one burst, not as a bracketed paste (what typing tools
    and terminals without paste mode send): the text goes in with tmux's `paste-buffer`
    without `-p`, which writes its bytes to the terminal as typed. The time is from the burst
    handed to tmux to the frame that shows its last characters (the last frame in the frame
    log once the screen shows them; nothing else draws meanwhile); every character counted
    in the message the mock receives."""
    for size in (5_000, 100_000):
        mock = Mock("Burst received.")
        shown, cpus, complete = [], [], []
        for _ in range(runs):
            root = tempfile.mkdtemp(prefix="tern-bench-")
            try:
                project = project_dir(root)
                home = os.path.join(root, "home")
                tern = Tern(home, project, mock)
                tern.wait_for("message tern")
                words, n = [], 0
                while sum(map(len, words)) + len(words) < size - 8:
                    n += 1
                    words.append(f"w{n}")
                text = " ".join(words)
                text += " " + "z" * (size - len(text) - len(BURST_END) - 2) + " " + BURST_END
                burst = os.path.join(root, "burst.txt")
                with open(burst, "w") as f:
                    f.write(text)
                subprocess.run(["tmux", "-L", tern.socket, "load-buffer", burst], check=True)
                before_cpu = cpu_seconds(tern.pid)
                start = time.time()
                subprocess.run(["tmux", "-L", tern.socket, "paste-buffer"], check=True)
                tern.wait_until(lambda screen: BURST_END in "".join(
                    row[2:] for row in screen.splitlines()), timeout=120)
                last = max(at for at, _ in tern.frame_log()) / 1e6
                shown.append((last - start) * 1e3)
                cpus.append(cpu_seconds(tern.pid) - before_cpu)
                tern.keys("Enter")
                tern.wait_for("Burst received.", timeout=60)
                exported = exported_transcript(tern, root)
                complete.append(text in exported)
                tern.stop()
            finally:
                shutil.rmtree(root, ignore_errors=True)
        mock.stop()
        print(f"{size:,} characters typed in one burst: the composer shows the last of them "
              f"{statistics.median(shown):.0f} ms after the burst was handed over (median of "
              f"{runs}; {min(shown):.0f}–{max(shown):.0f}), tern CPU "
              f"{statistics.median(cpus) * 1e3:.0f} ms; every character sent: {all(complete)}")


def runs_home(root):
    """A tern home under `root` whose config lets 8 subagents run at once, without titles."""
    home = os.path.join(root, "home")
    os.makedirs(home)
    with open(os.path.join(home, "config.toml"), "w") as f:
        f.write("[session]\nsidecar_titles = false\n[subagents]\nmax_concurrent = 8\n")
    return home


def eight_subagents():
    words = [f"word{i}" for i in range(2000)]
    reply = " ".join(words)
    mock = Mock(reply, between_us=500, subagents=8)
    root = tempfile.mkdtemp(prefix="tern-bench-")
    try:
        project = project_dir(root)
        home = runs_home(root)
        tern = Tern(home, project, mock, size=(160, 48))
        tern.wait_for("message tern")
        before_cpu = cpu_seconds(tern.pid)
        start = time.time()
        tern.keys("-l", "send eight subagents")
        tern.keys("Enter")
        # Every run reports in a notice; the last notice's turn ends with the text streamed.
        deadline = time.time() + 180
        while time.time() < deadline:
            results = glob.glob(os.path.join(home, "data/sessions/*/subagents/*/result.md"))
            screen = tern.screen()
            if len(results) == 8 and "ready ·" in screen and not any(
                    mark in screen for mark in ("● ", "… ")):
                break
            time.sleep(0.1)
        tern.wait_for("ready ·", timeout=60)
        elapsed = time.time() - start
        cpu = cpu_seconds(tern.pid) - before_cpu
        peak = peak_rss_mib(tern.pid)
        frames, busiest = frames_between(tern, start, elapsed)
        took = sorted(us for at, us in tern.frame_log() if start <= at / 1e6 <= start + elapsed)
        exported = exported_transcript(tern, root)
        results = glob.glob(os.path.join(home, "data/sessions/*/subagents/*/result.md"))
        whole = sum(1 for path in results if reply in open(path).read())
        tern.stop()
        print(f"8 subagents and the main session streaming 2,000 words at 2,000/s each: "
              f"{elapsed:.1f} s to every report, tern CPU {cpu:.1f} s ({100 * cpu / elapsed:.0f}% "
              f"of one core), peak RSS {peak:.1f} MiB, {len(frames) / elapsed:.0f} frames/s on "
              f"average, {busiest} in the busiest second (cap 60), a frame's work p50 "
              f"{took[len(took) // 2] / 1e3:.2f} ms p99 {took[len(took) * 99 // 100] / 1e3:.2f} ms; "
              f"every word in the main transcript: {reply in exported}; runs whose result "
              f"holds every word: {whole}/8")
    finally:
        mock.stop()
        shutil.rmtree(root, ignore_errors=True)


def ping_times(tern, mock, numbers):
    """Sends PING n for each n of `numbers`; for each, the seconds from its Enter to the frame that showed
    its answer's first word (tern marks that frame in its frame log), read once PONG-n is on
    screen, so how fast tmux answers does not count; and tern's own share of that: from
    taking the message from the composer to that frame, less the time the mock took from
    accepting the request's connection to writing its answer. Also returns tern's own stages
    alone: from taking the message to handing its request to the HTTP client, plus from the
    mock's answer to the frame (the mock's whole time left out, its wait for a core to read
    the request included)."""
    times, own, stages = [], [], []
    for n in numbers:
        tern.keys("-l", f"PING {n}")
        start = time.time()
        tern.keys("Enter")
        # The times come from the frame log; polling the screen gently keeps tmux from
        # taking the cores tern measures on.
        while f"PONG-{n}" not in tern.screen():
            if time.time() - start > 30:
                raise RuntimeError(f"never saw PONG-{n}:\n{tern.screen()}")
            time.sleep(0.05)
        # tern notes a frame after writing it to the terminal, so the note may come just
        # after the screen shows it.
        deadline = time.time() + 2
        while not (shown := [at for at, _, answer in tern.marked_frames()
                             if answer and at >= start * 1e6]):
            if time.time() > deadline:
                raise RuntimeError(f"no frame marked as showing PONG-{n}'s first word")
            time.sleep(0.01)
        frame = shown[0]
        times.append(frame / 1e6 - start)
        sent = [at for at in tern.inputs() if start * 1e6 <= at <= frame]
        # The mock may note its answer written only after tern has drawn it.
        served = [(read, answered) for read, answered in mock.answered()
                  if sent and sent[0] <= read <= frame]
        if sent and served:
            read, answered = served[0]
            own.append((frame - sent[0] - (min(answered, frame) - read)) / 1e6)
            asked = [at for at in tern.requests() if sent[0] <= at <= read]
            if asked:
                stages.append((asked[0] - sent[0] + frame - min(answered, frame)) / 1e6)
        time.sleep(0.5)
    return times, own, stages


def first_token():
    """In one tern on one store, so the disk's moods weigh on both alike: messages alone,
    then the same number while 8 runs stream."""
    pings = 15
    medians = {}
    own_medians = {}
    stage_medians = {}
    root = tempfile.mkdtemp(prefix="tern-bench-")
    # Long enough (20 s) that the runs stream through every message sent beside them.
    mock = Mock("", between_us=500, subagents=8, pings=2 * pings, words=40000,
                timings=os.path.join(root, "timings"), nice=10)
    try:
        tern = Tern(runs_home(root), project_dir(root), mock, size=(160, 48))
        tern.wait_for("message tern")
        for runs, numbers in ((0, range(1, pings + 1)), (8, range(pings + 1, 2 * pings + 1))):
            if runs:
                tern.keys("-l", "SEND eight subagents")
                tern.keys("Enter")
                tern.wait_for("Sent them.", timeout=60)
                tern.wait_for_streaming(500)
            times, own, stages = ping_times(tern, mock, numbers)
            medians[runs] = statistics.median(times)
            own_medians[runs] = statistics.median(own) if own else float("nan")
            stage_medians[runs] = statistics.median(stages) if stages else float("nan")
            print(f"first token with {runs} subagents streaming: median "
                  f"{1000 * medians[runs]:.0f} ms, each "
                  + ", ".join(f"{1000 * t:.0f}" for t in times) + " ms; tern's own share: "
                  f"median {1000 * own_medians[runs]:.1f} ms, each "
                  + ", ".join(f"{1000 * t:.1f}" for t in own) + " ms; its stages alone "
                  f"(to the request, and from the answer): median "
                  f"{1000 * stage_medians[runs]:.1f} ms")
        tern.stop()
    finally:
        mock.stop()
        shutil.rmtree(root, ignore_errors=True)
    print(f"first token beside 8 streaming subagents / alone: {medians[8] / medians[0]:.2f}x "
          f"from the Enter sent to tmux to the frame written; "
          f"{own_medians[8] / own_medians[0]:.2f}x in tern's own share; "
          f"{stage_medians[8] / stage_medians[0]:.2f}x in its own stages")


def long_session():
    mock = Mock("ok")
    root = tempfile.mkdtemp(prefix="tern-bench-")
    try:
        project = project_dir(root)
        home = os.path.join(root, "home")
        env = dict(os.environ, TERN_HOME=home)
        seeded = subprocess.run([SEED, "--messages", "10000", "--project", project], env=env,
                                capture_output=True, text=True, check=True)
        session = seeded.stdout.strip()
        tern = Tern(home, project, mock, args=("-r", session))
        first = tern.first_frame_ms(timeout=30)
        tern.wait_for("Finding 4999")
        time.sleep(1)
        rss_open = rss_mib(tern.pid)
        before = len(tern.frame_log())
        for _ in range(150):
            tern.keys("PageUp")
            time.sleep(0.02)
        time.sleep(0.5)
        paging = [took for _, took in tern.frame_log()[before:]]
        rss_paged = rss_mib(tern.pid)
        tern.keys("End")
        time.sleep(0.3)
        tern.stop()
        paging.sort()
        print(f"10,000-message session: first frame {first:.0f} ms, RSS {rss_open:.1f} MiB "
              f"open, {rss_paged:.1f} MiB after paging {len(paging)} frames up into it; frame "
              f"while paging: median {paging[len(paging) // 2] / 1000:.2f} ms, p99 "
              f"{paging[int(len(paging) * 0.99)] / 1000:.2f} ms; goals ≤ 60 MiB, ≤ 2 ms")
    finally:
        mock.stop()
        shutil.rmtree(root, ignore_errors=True)


PICKER_DB = os.path.join(ROOT, "target/bench-data/picker-100000/tern.redb")


def picker(runs):
    if not os.path.exists(PICKER_DB):
        print("picker: skipped; run `cargo bench --bench picker` once to build its database")
        return
    mock = Mock("ok")
    firsts, rss, shown = [], [], []
    for _ in range(runs):
        root = tempfile.mkdtemp(prefix="tern-bench-")
        try:
            project = project_dir(root)
            home = os.path.join(root, "home")
            os.makedirs(os.path.join(home, "data"))
            shutil.copy(PICKER_DB, os.path.join(home, "data", "tern.redb"))
            # A copied file has no mark of a clean close, so its first open checks it whole;
            # open it once, as any earlier run of tern would have.
            subprocess.run([TERN, "sessions", "list", "--limit", "1"], capture_output=True,
                           env=dict(os.environ, TERN_HOME=home), check=True)
            tern = Tern(home, project, mock, args=("-r",))
            firsts.append(tern.first_frame_ms(timeout=30))
            tern.wait_for("Resume a session", timeout=30)
            tern.keys("Tab")  # every project: the sessions are not this folder's
            time.sleep(1.5)  # the index is built by now
            tern.keys("-l", "kumquat")
            typed = time.time()
            tern.wait_for("Where did the kumquat", timeout=30)
            shown.append((time.time() - typed) * 1000)
            rss.append(rss_mib(tern.pid))
            tern.stop()
        finally:
            shutil.rmtree(root, ignore_errors=True)
    mock.stop()
    print(f"picker over 100,000 sessions: first frame median {statistics.median(firsts):.1f} ms; "
          f"typed query to its row on screen median {statistics.median(shown):.1f} ms "
          f"(screen polled every 20 ms); RSS with it open {statistics.median(rss):.1f} MiB; "
          f"goals ≤ 50 ms, ≤ 50 ms, ≤ 30 MiB")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--only", choices=["first", "second", "streaming", "subagents",
                                           "first-token", "long", "picker", "burst"],
                        help="run only this measurement")
    args = parser.parse_args()
    for binary in (TERN, MOCK, SEED):
        if not os.path.exists(binary):
            raise SystemExit(f"{binary} is missing: cargo build --release --bin tern --examples")
    measurements = {
        "first": lambda: first_frame_and_idle(args.runs),
        "second": lambda: second_terminal(args.runs),
        "streaming": streaming,
        "subagents": eight_subagents,
        "first-token": first_token,
        "long": long_session,
        "picker": lambda: picker(3),
        "burst": lambda: typed_burst(args.runs),
    }
    for name, measure in measurements.items():
        if args.only in (None, name):
            measure()


if __name__ == "__main__":
    main()
