//! The owner's socket under a live stream: a session in the owner streams a 4,000-word reply
//! from the mock provider at 2,000 words a second while four clients follow it over the
//! Unix socket. For every streamed word, the time from its arrival on a feed in the owner's
//! own process to its arrival on each client's feed: what the socket (the pump, the frame,
//! the client's reader) adds. Reported: p50, p99 and max over every word and client, and
//! whether every client saw every word.
//!
//! Run with `cargo bench --bench owner_socket` (`-- --words N`, default 4,000).

#[allow(unused_imports)]
#[path = "../tests/support/mod.rs"]
mod support;

#[path = "common/mod.rs"]
mod common;

use common::{deps, quantile_us};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{MockProvider, Reply, TernHome};
use tern::config::MaintenanceSettings;
use tern::gateway::remote::{Notify, Takeover};
use tern::gateway::{Feed, FeedItem, Reached, SessionManager, SessionService};
use tern::session::{OutputFilter, SessionEvent, UserInput};

const CLIENTS: usize = 4;
const BACKLOG: usize = 16_384;

/// When each streamed word reached a feed, in order, until the turn ended.
async fn arrivals(mut feed: Feed) -> Vec<Instant> {
    let mut seen = Vec::new();
    while let Some(item) = feed.next().await {
        match item {
            FeedItem::Event(stamped) => match stamped.event {
                SessionEvent::TextDelta { .. } => seen.push(Instant::now()),
                SessionEvent::TurnCompleted { .. } | SessionEvent::TurnFailed { .. } => break,
                _ => {}
            },
            FeedItem::Ended | FeedItem::Dropped(_) => break,
            _ => {}
        }
    }
    seen
}

async fn client(socket: &Path) -> SessionService {
    let takeover: Takeover = Arc::new(|| Box::pin(async { Ok(None) }));
    let quiet: Notify = Arc::new(|_| {});
    match SessionService::connect(socket, takeover, quiet).await {
        Ok(Reached::Owner(service)) => service,
        _ => panic!("no owner at {}", socket.display()),
    }
}

async fn stream(words: usize) {
    let home = TernHome::new();
    let mock = MockProvider::start().await;
    let text: String = (0..words).map(|i| format!("w{i} ")).collect();
    mock.push(Reply::text(text).delay_between_events(Duration::from_micros(500)));
    mock.repeat(Reply::text("A title"));
    let manager = SessionManager::new(deps(&home, &mock, MaintenanceSettings::default()));
    let owner = SessionService::local(Arc::new(manager));
    let socket = home.home().join("data/run/tern.sock");
    owner.serve(&socket).expect("serving");
    let project = home.project().canonicalize().expect("the project");
    let id = owner
        .open_key("cli:bench", &project)
        .await
        .expect("a session");

    let here = owner
        .subscribe(&id, None, OutputFilter::ALL, BACKLOG)
        .await
        .expect("a feed here");
    let mut clients = Vec::new();
    let mut followers = Vec::new();
    for _ in 0..CLIENTS {
        let service = client(&socket).await;
        let feed = service
            .subscribe(&id, None, OutputFilter::ALL, BACKLOG)
            .await
            .expect("a feed over the socket");
        followers.push(tokio::spawn(arrivals(feed)));
        clients.push(service);
    }
    let reference = tokio::spawn(arrivals(here));
    let started = Instant::now();
    owner
        .send_to(&id, UserInput::local("stream"))
        .await
        .expect("sent");
    let reference = reference.await.expect("the owner's feed");
    let mut lags = Vec::new();
    let mut complete = 0;
    for follower in followers {
        let seen = follower.await.expect("a client's feed");
        if seen.len() == reference.len() {
            complete += 1;
        }
        lags.extend(
            reference
                .iter()
                .zip(&seen)
                .map(|(at_owner, at_client)| at_client.saturating_duration_since(*at_owner)),
        );
    }
    let elapsed = started.elapsed();
    lags.sort();
    println!(
        "owner_socket/live: {} words in {:.1} s to {CLIENTS} clients ({complete} saw every \
         word): owner to client p50 {:.0} µs, p99 {:.0} µs, max {:.0} µs (goal p99 ≤ 2 ms)",
        reference.len(),
        elapsed.as_secs_f64(),
        quantile_us(&lags, 0.5),
        quantile_us(&lags, 0.99),
        quantile_us(&lags, 1.0),
    );
    drop(clients);
    owner.close_all().await;
}

fn main() {
    let benchmarking = std::env::args().any(|arg| arg == "--bench");
    let words = std::env::args()
        .skip_while(|arg| arg != "--words")
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(if benchmarking { 4000 } else { 200 });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(stream(words));
}
