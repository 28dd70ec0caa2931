//! Kept-alive connections a server gives up: llama.cpp closes every connection right after a
//! streamed reply though its headers promise keep-alive, and any server may close an idle
//! one just as it is reused. A request that meets such a connection is sent again at once on
//! a new one: no failed turn, no `Retry` event, no attempt counted, whatever the wire format.

use super::*;
use crate::support::KeepAlive;
use tern::config::ProviderKind;

/// The wire formats that stream over SSE and keep connections alive the same way.
const KINDS: [ProviderKind; 3] = [
    ProviderKind::Anthropic,
    ProviderKind::OpenAi,
    ProviderKind::Ollama,
];

/// Runs a turn of five tool rounds and a final answer against a mock in `mode`, with no
/// retry allowed (`max_attempts = 1`): a closed connection counted as a failed attempt
/// would fail the turn. Returns the world and the turn's events.
async fn five_rounds(kind: ProviderKind, mode: KeepAlive) -> (World, Vec<SessionEvent>) {
    let mut world = World::new(kind);
    world.max_attempts = 1;
    world.mock.keep_alive(mode);
    world.home.write_file("a.txt", "AAA\n");
    // Different arguments each round, so the loop guard lets every call run.
    for n in 1..=5 {
        let call = json!({ "path": "a.txt", "offset": n });
        world.mock.push(Reply::tool_call("file_read", call));
    }
    world.mock.push(Reply::text("done"));
    let handle = world.create();
    let events = turn(&handle, "read a.txt").await;
    (world, events)
}

fn retries(events: &[SessionEvent]) -> usize {
    events
        .iter()
        .filter(|e| matches!(e, SessionEvent::Retry { .. }))
        .count()
}

#[tokio::test]
async fn a_request_on_a_connection_the_server_gave_up_goes_again_at_once_on_a_new_one() {
    for kind in KINDS {
        let (world, events) = five_rounds(kind, KeepAlive::DropNextRequest).await;
        assert_eq!(completed(&events).as_deref(), Some("done"), "{kind:?}");
        assert_eq!(retries(&events), 0, "{kind:?}: silent, with no backoff");
        // The mock answers only the first request of a connection, so a reused one was
        // met; each reply was served once.
        assert!(world.mock.dropped_requests() >= 1, "{kind:?}");
        assert_eq!(world.mock.model_requests().len(), 6, "{kind:?}");
        assert_eq!(world.mock.remaining(), 0, "{kind:?}");
    }
}

/// How many answered requests came on a connection that had answered one before.
fn reused(world: &World) -> usize {
    let mut seen = std::collections::BTreeSet::new();
    let connections = world
        .mock
        .model_requests()
        .into_iter()
        .map(|r| r.connection);
    connections.filter(|c| !seen.insert(*c)).count()
}

#[tokio::test]
async fn a_server_that_closes_after_each_stream_like_llama_cpp_fails_no_turn() {
    for kind in KINDS {
        let (world, events) = five_rounds(kind, KeepAlive::CloseAfterResponse).await;
        assert_eq!(completed(&events).as_deref(), Some("done"), "{kind:?}");
        assert_eq!(retries(&events), 0, "{kind:?}");
        assert_eq!(world.mock.model_requests().len(), 6, "{kind:?}");
        assert_eq!(reused(&world), 0, "{kind:?}: the server closed each one");
    }
}

#[tokio::test]
async fn connections_a_server_keeps_are_reused() {
    let (world, events) = five_rounds(ProviderKind::Anthropic, KeepAlive::On).await;
    assert_eq!(completed(&events).as_deref(), Some("done"));
    assert_eq!(world.mock.model_requests().len(), 6);
    assert!(reused(&world) >= 1, "{:?}", world.mock.connections());
    assert!(world.mock.connections() < 6);
}
