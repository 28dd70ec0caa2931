//! The chat channels through the whole process: the release `tern serve` against the fake
//! platforms of the channel tests (`tests/it/channels/fakes/`) and the mock provider, all on
//! 127.0.0.1.
//!
//! - `webhook ack`: signed POSTs one after the other, each to a thread of its own; the time
//!   from sending the request to its 202, which tern answers once the input is journaled
//!   (goal ≤ 10 ms). Every reply must reach the reply URL.
//! - `slack ack`: `app_mention` envelopes one after the other, each a thread of its own; the
//!   time from the fake sending the envelope to the session's `input_accepted` record (its
//!   `at_ms`, read afterwards with `tern sessions show --json`; ms resolution), goal ≤ 10 ms;
//!   and to Socket Mode's ack frame (Slack's limit is 3 s).
//! - `slack 50 threads`: 50 mentions at once, each in a channel of its own, each answered
//!   with a ~150-word reply streamed for about 3 s, while the fake Slack enforces Slack's
//!   documented limits (`chat.update` Tier 3: a bucket of 20 refilling 60 a minute per
//!   workspace; `chat.postMessage`: 1 a second per channel with a burst of 3, and a bucket of
//!   20 refilling 300 a minute per workspace) and answers 429 with `Retry-After` past them.
//!   Reported: the wall time until every thread shows its whole final text, the 429s (goal
//!   0), the calls per method, and the threads whose final text arrived whole (goal: all).
//! - `idle memory`: `tern serve` with Slack, Discord and Mattermost connected to their
//!   fakes, idle 3 s: VmRSS and VmHWM (goal ≤ 30 MiB); again with the webhook added, and with
//!   no channel for comparison.
//!
//! Run with `cargo bench --bench channels` (`-- --quick` for small counts; `--posts N`,
//! `--mentions N`, `--threads N`, `--words N` to set them). Without `--bench` (`cargo test
//! --benches`) it is a fast smoke run.

#[allow(unused_imports)]
#[path = "../tests/support/mod.rs"]
mod support;

#[path = "../tests/it/channels/fakes/mod.rs"]
mod fakes;

use fakes::discord::Discord;
use fakes::mattermost::Chat;
use fakes::server::{Fake, HttpResponse, post};
use fakes::slack::{Limits, SlackFake};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use support::{MockProvider, Reply, TernHome};
use tern::channels::signature::Secret;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const SESSION: &str = "[session]\nsidecar_titles = false\n";
const WITHIN: Duration = Duration::from_secs(30);

/// `tern serve` from the release build, in a home of its own, its stderr gathered.
struct Serve {
    home: TernHome,
    env: Vec<(String, String)>,
    child: Option<Child>,
    stderr: Arc<Mutex<String>>,
}

impl Serve {
    fn start(config: &str, env: &[(&str, &str)], mock: &MockProvider) -> Self {
        let home = TernHome::new();
        home.write_config(config);
        let mut env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        env.push(("ANTHROPIC_API_KEY".into(), "bench-key".into()));
        env.push(("ANTHROPIC_BASE_URL".into(), mock.base_url()));
        let mut command = home.tern_process();
        command
            .arg("serve")
            .current_dir(home.project())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (name, value) in &env {
            command.env(name, value);
        }
        let mut child = command.spawn().expect("tern serve starts");
        let stderr = Arc::new(Mutex::new(String::new()));
        let pipe = child.stderr.take().expect("its stderr");
        let gathered = stderr.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                let mut all = gathered.lock().unwrap();
                all.push_str(&line);
                all.push('\n');
            }
        });
        Self {
            home,
            env,
            child: Some(child),
            stderr,
        }
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Another tern command beside the server.
    fn tern(&self, args: &[&str]) -> Output {
        let mut command = self.home.tern_process();
        command.args(args).current_dir(self.home.project());
        for (name, value) in &self.env {
            command.env(name, value);
        }
        command.output().expect("tern runs")
    }

    fn status(&self) -> String {
        String::from_utf8_lossy(&self.tern(&["channels", "status"]).stdout).into_owned()
    }

    /// Waits until `tern channels status` shows each of `channels` connected.
    fn wait_connected(&self, channels: &[&str]) {
        let deadline = Instant::now() + WITHIN;
        loop {
            let status = self.status();
            let connected = channels.iter().all(|name| {
                status
                    .lines()
                    .any(|l| l.trim_start().starts_with(&format!("{name}: connected")))
            });
            if connected {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "not all of {channels:?} connected: {status}\n{}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The sessions' ids by key.
    fn sessions(&self) -> HashMap<String, String> {
        let listed = self.tern(&["sessions", "list", "--json", "--limit", "100000"]);
        let listed: Value = serde_json::from_slice(&listed.stdout).expect("JSON sessions");
        listed
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| {
                let key = match &s["key"] {
                    Value::String(key) => key.clone(),
                    other => other.to_string(),
                };
                Some((key, s["id"].as_str()?.to_owned()))
            })
            .collect()
    }

    /// A session's journal records.
    fn journal(&self, id: &str) -> Vec<Value> {
        let shown = self.tern(&["sessions", "show", id, "--json"]);
        let records: Value = serde_json::from_slice(&shown.stdout).expect("JSON records");
        records.as_array().cloned().unwrap_or_default()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        // SAFETY: signalling a child process this bench started.
        unsafe {
            libc::kill(child.id() as i32, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while child.try_wait().ok().flatten().is_none() {
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A port nothing listens on now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn wall_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
        * 1e3
}

/// The `q` quantile of `values`, sorted here.
fn quantile(values: &[f64], q: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let index = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[index]
}

fn summary(values: &[f64], digits: usize) -> String {
    format!(
        "p50 {:.digits$} ms, p99 {:.digits$} ms, max {:.digits$} ms",
        quantile(values, 0.5),
        quantile(values, 0.99),
        quantile(values, 1.0),
    )
}

fn wait_until(within: Duration, what: &str, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    while !check() {
        if Instant::now() > deadline {
            eprintln!("channels: {what} did not happen within {within:?}");
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    true
}

/// Signed POSTs to the webhook one after the other, each a thread of its own.
fn webhook_acks(posts: usize) {
    let replies = Fake::start(Arc::new(|_| HttpResponse::json(200, json!({}))), None);
    let mock = MockProvider::bind_with_threads(0, 2).expect("the mock");
    mock.repeat(Reply::text("Done: the build is green again."));
    mock.disable_recording();
    let port = free_port();
    let config = format!(
        "{SESSION}[channels.webhook]\nlisten = \"127.0.0.1:{port}\"\n\
         [channels.webhook.endpoints.ci]\nsecret_env = \"CI_SECRET\"\nreply_url = \"{}/reply\"\n",
        replies.base_url()
    );
    let serve = Serve::start(&config, &[("CI_SECRET", SECRET)], &mock);
    serve.wait_connected(&["webhook"]);
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let secret = Secret::parse(SECRET).expect("the secret");
    let mut times = Vec::with_capacity(posts);
    let mut refused = 0;
    for i in 0..posts {
        let body = format!(r#"{{"text": "build {i} failed on main", "thread": "build-{i}"}}"#);
        let id = format!("msg_bench_{i}");
        let at = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        let headers = vec![
            ("webhook-id", id.clone()),
            ("webhook-timestamp", at.to_string()),
            ("webhook-signature", secret.sign(&id, at, body.as_bytes())),
        ];
        let start = Instant::now();
        let (status, _) = post(addr, "/webhook/ci", &headers, body.as_bytes());
        times.push(start.elapsed().as_secs_f64() * 1e3);
        if status != 202 {
            refused += 1;
        }
    }
    let delivered = wait_until(Duration::from_secs(60), "every webhook reply", || {
        replies.to("/reply").len() >= posts
    });
    println!(
        "channels/webhook ack: {posts} signed POSTs one after the other, each a new thread: \
         request → 202 {} (goal ≤ 10 ms); first {:.2} ms; {refused} not 202; replies POSTed \
         back {}/{posts}{}",
        summary(&times, 2),
        times[0],
        replies.to("/reply").len(),
        if delivered { "" } else { " (timed out)" },
    );
}

/// `app_mention` envelopes one after the other, each a thread of its own.
fn slack_acks(mentions: usize) {
    let slack = SlackFake::start();
    let mock = MockProvider::bind_with_threads(0, 2).expect("the mock");
    mock.repeat(Reply::text("On it: the answer."));
    mock.disable_recording();
    let config = format!("{SESSION}{}", slack.section(&["C1"], "1s"));
    let serve = Serve::start(&config, &SlackFake::env(), &mock);
    slack.wait_connections(1);
    serve.wait_connected(&["slack"]);
    let base = mock.connections();
    let mut sent = Vec::with_capacity(mentions);
    let mut acks = Vec::with_capacity(mentions);
    for i in 0..mentions {
        let ts = format!("1700000{i:03}.000100");
        let (wall, start) = (wall_ms(), Instant::now());
        let envelope = slack.mention_in("C1", &format!("Ev{i}"), "U1", &ts, &format!("q {i}"));
        wait_until(WITHIN, "the ack", || slack.acked(&envelope));
        let acked = slack.acked_at(&envelope).unwrap_or(start);
        acks.push(acked.duration_since(start).as_secs_f64() * 1e3);
        sent.push((ts, wall));
        // One after the other: the next once this one's turn reached the model.
        wait_until(WITHIN, "the model request", || {
            mock.connections() > base + i
        });
    }
    let ids = serve.sessions();
    let mut accepted = Vec::with_capacity(mentions);
    for (ts, wall) in &sent {
        let key = format!("slack:T1/C1/{ts}");
        let Some(id) = ids.get(&key) else {
            eprintln!("channels: no session for {key}");
            continue;
        };
        let at = serve
            .journal(id)
            .into_iter()
            .find(|r| r["event"]["type"] == "input_accepted")
            .and_then(|r| r["at_ms"].as_f64());
        match at {
            Some(at) => accepted.push((at - wall).max(0.0)),
            None => eprintln!("channels: no input_accepted in {id}"),
        }
    }
    println!(
        "channels/slack ack: {mentions} app_mention envelopes one after the other, each a new \
         thread: envelope → input_accepted at_ms {} (ms resolution; goal ≤ 10 ms); first {} \
         ms; {}/{mentions} journaled",
        summary(&accepted, 0),
        accepted
            .first()
            .map_or("-".to_owned(), |f| format!("{f:.0}")),
        accepted.len()
    );
    println!(
        "channels/slack ack: envelope → Socket Mode ack frame {} (Slack's limit 3 s); first \
         {:.2} ms",
        summary(&acks, 2),
        acks[0]
    );
}

/// `threads` mentions at once, each streaming a reply of `words` words, under Slack's limits.
fn slack_streams(threads: usize, words: usize, between: Duration) {
    let slack = SlackFake::start();
    let mock = MockProvider::bind_with_threads(0, 2).expect("the mock");
    let channels: Vec<String> = (0..threads).map(|i| format!("C{i:03}")).collect();
    let mut answers = Vec::with_capacity(threads);
    for i in 0..threads {
        let answer: String = (0..words)
            .map(|w| format!("t{i}w{w}"))
            .collect::<Vec<_>>()
            .join(" ");
        mock.push_for_latest(
            &format!("question-{i:03}."),
            Reply::text(answer.clone()).delay_between_events(between),
        );
        answers.push(answer);
    }
    let names: Vec<&str> = channels.iter().map(String::as_str).collect();
    let config = format!("{SESSION}{}", slack.section(&names, "1s"));
    let serve = Serve::start(&config, &SlackFake::env(), &mock);
    slack.wait_connections(1);
    serve.wait_connected(&["slack"]);
    slack.state.lock().unwrap().limits = Some(Limits::documented());
    let start = Instant::now();
    for (i, channel) in channels.iter().enumerate() {
        let ts = format!("1700001{i:03}.000100");
        slack.mention_in(
            channel,
            &format!("EvS{i}"),
            "U1",
            &ts,
            &format!("question-{i:03}. Explain it at length."),
        );
    }
    let mut done: Vec<Option<Duration>> = vec![None; threads];
    wait_until(Duration::from_secs(150), "every final text", || {
        for (i, channel) in channels.iter().enumerate() {
            if done[i].is_none() && slack.showing(channel).iter().any(|t| *t == answers[i]) {
                done[i] = Some(start.elapsed());
            }
        }
        std::thread::sleep(Duration::from_millis(20));
        done.iter().all(Option::is_some)
    });
    let finished: Vec<f64> = done
        .iter()
        .flatten()
        .map(|d| d.as_secs_f64() * 1e3)
        .collect();
    let state = slack.state.lock().unwrap();
    let limited: usize = state.limited.values().sum();
    let by_method: BTreeMap<String, usize> = state.limited.clone();
    drop(state);
    let calls = |method: &str| slack.fake.to(&format!("/api/{method}")).len();
    // Updates of a message still streaming end in " …"; the rest carry a final text.
    let streaming = slack
        .updates()
        .iter()
        .filter(|u| u["text"].as_str().is_some_and(|t| t.ends_with(" …")))
        .count();
    // Whole: each thread shows its answer exactly once, and nothing of another's.
    let whole = (0..threads)
        .filter(|i| {
            let shown = slack.showing(&channels[*i]);
            shown.len() == 1 && shown[0] == answers[*i]
        })
        .count();
    let wall = finished.iter().copied().fold(0.0, f64::max) / 1e3;
    println!(
        "channels/slack {threads} threads: {threads} mentions at once, ~{words}-word replies \
         streamed {:.1} s each: every final text shown after {wall:.1} s ({}/{threads} \
         finished; per thread p50 {:.1} s); 429s from the fake {limited} {by_method:?} (goal 0); \
         calls chat.postMessage {}, chat.update {} ({streaming} while streaming); final texts \
         whole {whole}/{threads} (goal {threads})",
        between.as_secs_f64() * (words + 8) as f64,
        finished.len(),
        if finished.is_empty() {
            0.0
        } else {
            quantile(&finished, 0.5) / 1e3
        },
        calls("chat.postMessage"),
        calls("chat.update"),
    );
    drop(serve);
}

/// VmRSS and VmHWM of `pid`, in MiB.
fn memory(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("its status");
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next()?.parse::<f64>().ok())
            .map_or(f64::NAN, |kib| kib / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// `tern serve` with the three chat platforms (and the webhook when `webhook`) connected to
/// their fakes, idle for `idle`.
fn idle_memory(webhook: bool, none: bool, idle: Duration) {
    let mock = MockProvider::start_blocking();
    let (slack, discord, chat) = (SlackFake::start(), Discord::start(), Chat::start());
    // Discord's usual interval, rather than the tests' quick one.
    discord
        .state
        .heartbeat_ms
        .store(41_250, std::sync::atomic::Ordering::SeqCst);
    let mut config = SESSION.to_owned();
    let mut env: Vec<(&str, &str)> = Vec::new();
    let mut names = Vec::new();
    if !none {
        config.push_str(&slack.section(&["C1"], "1s"));
        config.push_str(&discord.section());
        config.push_str(&chat.section());
        env.extend(SlackFake::env());
        env.extend(Discord::env());
        env.extend(Chat::env());
        names.extend(["slack", "discord", "mattermost"]);
    }
    if webhook {
        let port = free_port();
        config.push_str(&format!(
            "[channels.webhook]\nlisten = \"127.0.0.1:{port}\"\n\
             [channels.webhook.endpoints.ci]\nsecret_env = \"CI_SECRET\"\n"
        ));
        env.push(("CI_SECRET", SECRET));
        names.push("webhook");
    }
    let serve = Serve::start(&config, &env, &mock);
    if none {
        wait_until(WITHIN, "serving", || {
            serve.stderr().contains("serving the sessions")
        });
    } else {
        serve.wait_connected(&names);
    }
    std::thread::sleep(idle);
    let (rss, hwm) = memory(serve.pid());
    let what = match (none, webhook) {
        (true, _) => "no channel (for comparison)".to_owned(),
        (false, false) => "slack, discord, mattermost connected".to_owned(),
        (false, true) => "slack, discord, mattermost connected + webhook".to_owned(),
    };
    println!(
        "channels/idle memory: tern serve, {what}, idle {:.0} s: VmRSS {rss:.1} MiB, VmHWM \
         {hwm:.1} MiB (goal ≤ 30 MiB)",
        idle.as_secs_f64()
    );
}

fn arg(name: &str) -> Option<usize> {
    std::env::args()
        .skip_while(|a| a != name)
        .nth(1)
        .and_then(|n| n.parse().ok())
}

fn main() {
    let benchmarking = std::env::args().any(|a| a == "--bench");
    let quick = !benchmarking || std::env::args().any(|a| a == "--quick");
    let posts = arg("--posts").unwrap_or(if quick { 20 } else { 200 });
    let mentions = arg("--mentions").unwrap_or(if quick { 10 } else { 100 });
    let threads = arg("--threads").unwrap_or(if quick { 5 } else { 50 });
    let words = arg("--words").unwrap_or(if quick { 30 } else { 150 });
    let idle = Duration::from_secs(if quick { 1 } else { 3 });
    webhook_acks(posts);
    slack_acks(mentions);
    slack_streams(threads, words, Duration::from_millis(20));
    idle_memory(false, false, idle);
    idle_memory(true, false, idle);
    idle_memory(false, true, idle);
}
