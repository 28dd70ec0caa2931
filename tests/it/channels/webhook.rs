//! Signed webhooks into `tern serve`: the Standard Webhooks checks at the door, the input
//! acknowledged with its session, the reply POSTed back signed, and the session shared with
//! the other tern commands.

use super::fakes::server::{Fake, HttpResponse, post};
use super::{Served, free_port, text};
use crate::support::Reply;
use std::sync::Arc;
use std::time::Duration;
use tern::channels::signature::Secret;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

fn config(port: u16, reply: &str, extra: &str) -> String {
    format!(
        "[session]\nsidecar_titles = false\n\
         [channels.webhook]\nlisten = \"127.0.0.1:{port}\"\nmax_body = 4096\n{extra}\
         [channels.webhook.endpoints.ci]\nsecret_env = \"CI_SECRET\"\nreply_url = \"{reply}/reply\"\n"
    )
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// Headers of a delivery signed with `secret` at `at`.
fn signed(id: &str, at: i64, body: &[u8], secret: &str) -> Vec<(&'static str, String)> {
    let secret = Secret::parse(secret).unwrap();
    vec![
        ("webhook-id", id.to_owned()),
        ("webhook-timestamp", at.to_string()),
        ("webhook-signature", secret.sign(id, at, body)),
    ]
}

fn serve_with_reply_url(status: u16) -> (Served, Fake, std::net::SocketAddr) {
    let fake = Fake::start(
        Arc::new(move |_| HttpResponse::json(status, serde_json::json!({"ok": true}))),
        None,
    );
    let port = free_port();
    let served = Served::start(
        &config(port, &fake.base_url(), ""),
        &[("CI_SECRET", SECRET)],
    );
    served.wait_said("webhook: connected", Duration::from_secs(20));
    (served, fake, ([127, 0, 0, 1], port).into())
}

#[test]
fn a_signed_delivery_starts_a_turn_whose_reply_is_posted_back_signed() {
    let (mut served, fake, addr) = serve_with_reply_url(200);
    served.mock.push(Reply::text(
        "The build broke in `parse_config`: a missing comma.",
    ));
    let body = br#"{"text": "the build broke on main", "thread": "build-1234"}"#;
    let (status, answer) = post(
        addr,
        "/webhook/ci",
        &signed("msg_1", now(), body, SECRET),
        body,
    );
    assert_eq!(status, 202, "{answer}");
    let answer: serde_json::Value = serde_json::from_str(&answer).unwrap();
    let session = answer["session"].as_str().unwrap().to_owned();
    assert!(answer["seq"].as_u64().is_some(), "{answer}");

    fake.wait_for(Duration::from_secs(20), "the reply", |r| !r.is_empty());
    let reply = &fake.to("/reply")[0];
    let sent = reply.json();
    assert_eq!(sent["thread"], "build-1234");
    assert_eq!(sent["session"], session.as_str());
    assert_eq!(
        sent["text"],
        "The build broke in `parse_config`: a missing comma."
    );
    // Signed the same way, with the same secret.
    let verified = Secret::parse(SECRET).unwrap().verify(
        reply.header("webhook-id"),
        reply.header("webhook-timestamp"),
        reply.header("webhook-signature"),
        &reply.body,
        now(),
    );
    assert_eq!(verified, Ok(()));

    // The model saw the text as the webhook's input.
    let request = &served.mock.model_requests()[0];
    assert!(
        request
            .texts()
            .iter()
            .any(|t| t.contains("the build broke on main"))
    );

    // The session is one of the store's, under its thread's key, for every tern command.
    let listed = text(&served.tern(&["sessions", "list"]));
    assert!(listed.contains(&session[..8]), "{listed}");
    assert!(listed.contains("webhook · "), "{listed}");
    let status = text(&served.tern(&["channels", "status"]));
    assert!(status.contains("webhook: connected"), "{status}");
    assert!(status.contains("1 inputs"), "{status}");

    assert!(served.stop().success(), "{}", served.stderr());
}

#[test]
fn refused_signatures_stale_times_replays_and_oversized_bodies_start_nothing() {
    let (mut served, fake, addr) = serve_with_reply_url(200);
    served.mock.push(Reply::text("once"));
    let body = br#"{"text": "deploy finished", "thread": "deploy-7"}"#;

    let wrong = signed("msg_a", now(), body, "whsec_c2VjcmV0LW5vdC10aGlzLW9uZQ==");
    let (status, answer) = post(addr, "/webhook/ci", &wrong, body);
    assert_eq!(status, 401, "{answer}");
    assert!(answer.contains("no v1 signature matches"), "{answer}");

    let stale = signed("msg_b", now() - 600, body, SECRET);
    let (status, answer) = post(addr, "/webhook/ci", &stale, body);
    assert_eq!(status, 401, "{answer}");
    assert!(
        answer.contains("away from this machine's clock"),
        "{answer}"
    );
    let future = signed("msg_c", now() + 600, body, SECRET);
    assert_eq!(post(addr, "/webhook/ci", &future, body).0, 401);

    // The signature covers the raw body: one changed byte fails.
    let headers = signed("msg_d", now(), body, SECRET);
    let changed = br#"{"text": "deploy finished", "thread": "deploy-8"}"#;
    assert_eq!(post(addr, "/webhook/ci", &headers, changed).0, 401);

    let big = format!(r#"{{"text": "{}", "thread": "t"}}"#, "x".repeat(5000));
    let (status, answer) = post(
        addr,
        "/webhook/ci",
        &signed("msg_e", now(), big.as_bytes(), SECRET),
        big.as_bytes(),
    );
    assert_eq!(status, 413, "{answer}");
    assert!(answer.contains("max_body"), "{answer}");

    assert_eq!(
        post(
            addr,
            "/webhook/nope",
            &signed("msg_f", now(), body, SECRET),
            body
        )
        .0,
        404
    );
    assert!(
        served.mock.model_requests().is_empty(),
        "nothing refused reached the model"
    );

    // Accepted once; the same delivery id again starts nothing.
    let first = signed("msg_g", now(), body, SECRET);
    assert_eq!(post(addr, "/webhook/ci", &first, body).0, 202);
    let (status, answer) = post(addr, "/webhook/ci", &first, body);
    assert_eq!(status, 200, "{answer}");
    assert!(answer.contains("\"duplicate\":true"), "{answer}");
    fake.wait_for(Duration::from_secs(20), "the reply", |r| !r.is_empty());
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(served.mock.model_requests().len(), 1);
    assert_eq!(fake.to("/reply").len(), 1);

    let bad_thread = br#"{"text": "x", "thread": "a/b"}"#;
    let (status, answer) = post(
        addr,
        "/webhook/ci",
        &signed("msg_h", now(), bad_thread, SECRET),
        bad_thread,
    );
    assert_eq!(status, 400, "{answer}");
    assert!(
        answer.contains("`thread` cannot name a session"),
        "{answer}"
    );
    assert!(served.stop().success());
}

#[test]
fn a_reply_url_that_fails_for_now_gets_the_reply_later_and_loses_nothing() {
    // The receiver answers 503 twice, then takes the reply.
    let tries = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = tries.clone();
    let fake = Fake::start(
        Arc::new(move |_| {
            let n = counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if n < 2 {
                HttpResponse::json(503, serde_json::json!({})).with_header("retry-after", "0")
            } else {
                HttpResponse::json(200, serde_json::json!({}))
            }
        }),
        None,
    );
    let port = free_port();
    let mut served = Served::start(
        &config(port, &fake.base_url(), ""),
        &[("CI_SECRET", SECRET)],
    );
    served.wait_said("webhook: connected", Duration::from_secs(20));
    served.mock.push(Reply::text("Delivered in the end."));
    let body = br#"{"text": "status?", "thread": "t1"}"#;
    let addr = ([127, 0, 0, 1], port).into();
    assert_eq!(
        post(
            addr,
            "/webhook/ci",
            &signed("msg_1", now(), body, SECRET),
            body
        )
        .0,
        202
    );
    fake.wait_for(Duration::from_secs(30), "three tries", |r| r.len() >= 3);
    let last = fake.to("/reply").pop().unwrap().json();
    assert_eq!(last["text"], "Delivered in the end.");
    assert!(served.stop().success());
}

#[test]
fn a_reply_cut_off_by_a_stop_is_delivered_by_the_next_tern() {
    // The receiver is down until the first tern has stopped.
    let up = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let answering = up.clone();
    let fake = Fake::start(
        Arc::new(move |_| {
            if answering.load(std::sync::atomic::Ordering::SeqCst) {
                HttpResponse::json(200, serde_json::json!({}))
            } else {
                HttpResponse::json(503, serde_json::json!({}))
            }
        }),
        None,
    );
    let port = free_port();
    let mut served = Served::start(
        &config(port, &fake.base_url(), ""),
        &[("CI_SECRET", SECRET)],
    );
    served.wait_said("webhook: connected", Duration::from_secs(20));
    served.mock.push(Reply::text("Kept for the next tern."));
    let body = br#"{"text": "report", "thread": "r1"}"#;
    let addr = ([127, 0, 0, 1], port).into();
    assert_eq!(
        post(
            addr,
            "/webhook/ci",
            &signed("msg_1", now(), body, SECRET),
            body
        )
        .0,
        202
    );
    fake.wait_for(Duration::from_secs(20), "a try", |r| !r.is_empty());
    assert!(served.stop().success(), "{}", served.stderr());

    up.store(true, std::sync::atomic::Ordering::SeqCst);
    served.start_again();
    served.wait_said("serving the sessions", Duration::from_secs(20));
    fake.wait_for(Duration::from_secs(20), "the reply", |requests| {
        requests
            .iter()
            .any(|r| r.json()["text"] == "Kept for the next tern.")
    });
    // The reply resumed by the next tern names its session as the first would have.
    let resumed = fake
        .to("/reply")
        .into_iter()
        .map(|r| r.json())
        .find(|b| b["text"] == "Kept for the next tern.")
        .unwrap();
    assert!(
        resumed["session"].as_str().is_some_and(|id| id.len() == 36),
        "{resumed}"
    );
    // Delivered once: once the tern has seen it land, a third start has nothing left to send.
    let pending = served
        .home
        .home()
        .join("data")
        .join("channels")
        .join("pending.json");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while std::fs::read_to_string(&pending).is_ok_and(|text| text.contains("webhook:ci/r1")) {
        assert!(std::time::Instant::now() < deadline, "still pending");
        std::thread::sleep(Duration::from_millis(20));
    }
    let stopped = served.stop();
    assert!(stopped.success(), "{stopped:?}: {}", served.stderr());
    let delivered = fake.to("/reply").len();
    served.start_again();
    served.wait_said("webhook: connected", Duration::from_secs(20));
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(fake.to("/reply").len(), delivered);
    assert_eq!(
        served.mock.model_requests().len(),
        1,
        "the model was asked once"
    );
}

#[test]
fn a_second_tern_serve_waits_beside_the_first_and_takes_the_channels_over_when_it_stops() {
    let (mut first, fake, addr) = serve_with_reply_url(200);
    // The second one becomes a client of the first, and says so.
    let mut second = first.home.tern_process();
    second
        .arg("serve")
        .current_dir(first.home.project())
        .env("CI_SECRET", SECRET)
        .env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", first.mock.base_url())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let mut second = second.spawn().expect("a second tern serve");
    let stderr = second.stderr.take().unwrap();
    let said = Arc::new(std::sync::Mutex::new(String::new()));
    let gathered = said.clone();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            gathered.lock().unwrap().push_str(&(line + "\n"));
        }
    });
    let wait_said = |needle: &str| {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while !said.lock().unwrap().contains(needle) {
            assert!(
                std::time::Instant::now() < deadline,
                "{}",
                said.lock().unwrap()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    wait_said("another tern process owns the sessions");

    assert!(first.stop().success(), "{}", first.stderr());
    // The second took the store over and listens in its place.
    first.mock.push(Reply::text("Answered by the second."));
    let body = br#"{"text": "still there?", "thread": "t9"}"#;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let (status, _) = post(
            addr,
            "/webhook/ci",
            &signed(&format!("msg_{}", now_ms()), now(), body, SECRET),
            body,
        );
        if status == 202 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the second never listened: {}",
            said.lock().unwrap()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    fake.wait_for(Duration::from_secs(20), "the reply", |requests| {
        requests
            .iter()
            .any(|r| r.json()["text"] == "Answered by the second.")
    });
    // SAFETY: signalling a child process this test started.
    unsafe {
        libc::kill(second.id() as i32, libc::SIGTERM);
    }
    assert!(second.wait().unwrap().success(), "{}", said.lock().unwrap());
}

fn now_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}
