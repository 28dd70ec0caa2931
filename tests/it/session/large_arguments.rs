//! Large tool-call arguments: a written file's content leaves the history once the call has
//! its result, in every wire format, and stays out of it after the session is reopened; an
//! argument under `max_argument_bytes` stays until compaction needs the room.

use super::*;
use pretty_assertions::assert_eq;
use tern::config::ProviderKind;

/// The arguments of every call in the request's history, as objects, whatever the wire
/// format: Anthropic's `tool_use` input, or the chat formats' function arguments (a JSON
/// string for OpenAI, an object for Ollama).
fn call_arguments(request: &Value) -> Vec<Value> {
    let mut out = Vec::new();
    for message in request["messages"].as_array().into_iter().flatten() {
        for block in message["content"].as_array().into_iter().flatten() {
            if block["type"] == "tool_use" {
                out.push(block["input"].clone());
            }
        }
        for call in message["tool_calls"].as_array().into_iter().flatten() {
            let arguments = &call["function"]["arguments"];
            out.push(match arguments.as_str() {
                Some(text) => serde_json::from_str(text).expect("arguments are JSON"),
                None => arguments.clone(),
            });
        }
    }
    out
}

#[tokio::test]
async fn a_written_file_s_content_leaves_the_history_in_every_wire_format() {
    // 1 MiB: 16,384 lines of 64 bytes.
    let content: String = (0..16_384)
        .map(|i| format!("line {i:05} of the generated table, padded to sixty-four bytes..\n"))
        .collect();
    assert_eq!(content.len(), 1024 * 1024);
    for kind in [
        ProviderKind::Anthropic,
        ProviderKind::OpenAi,
        ProviderKind::Ollama,
    ] {
        let mut world = World::new(kind);
        world.approval = ApprovalMode::Edits;
        world.mock.push(Reply::tool_call(
            "file_write",
            json!({"path": "gen/table.txt", "content": content}),
        ));
        world.mock.push(Reply::text("Written."));
        let handle = world.create();
        let events = turn(&handle, "write the table").await;
        assert_eq!(completed(&events).as_deref(), Some("Written."), "{kind:?}");
        // Replaced as the call got its result, not by a compaction.
        let compacted = events
            .iter()
            .any(|e| matches!(e, SessionEvent::Compacted { .. }));
        assert!(!compacted, "{kind:?}");

        let written = std::fs::read_to_string(world.home.project().join("gen/table.txt"));
        assert_eq!(written.unwrap(), content, "{kind:?}: the file holds it all");
        let requests = world.mock.model_requests();
        let (before, after) = (&requests[0], &requests[1]);
        let grew = after.raw_body.len() - before.raw_body.len();
        assert!(grew <= 64 * 1024, "{kind:?}: the request grew {grew} bytes");
        assert_eq!(
            call_arguments(&after.body),
            [json!({
                "path": "gen/table.txt",
                "content": "[content of 1.0 MiB written to gen/table.txt by file_write; read \
                            the file to see it]",
            })],
            "{kind:?}"
        );
        assert_eq!(after.tool_use_ids(), after.tool_result_ids(), "{kind:?}");

        // The journal keeps the call as the model made it, for the transcript; the history
        // the model is sent is the same after the session is opened again.
        let id = handle.id().clone();
        let live = handle.state().await.unwrap();
        handle.close().await;
        let journaled = journal(&world, &id)
            .into_iter()
            .find_map(|event| match event {
                JournalEvent::AssistantMessage { content, .. } => Some(content),
                _ => None,
            });
        let ContentBlock::ToolUse(call) = &journaled.unwrap()[0] else {
            panic!("{kind:?}: the first reply is the call");
        };
        assert_eq!(call.input["content"], content.as_str(), "{kind:?}");
        let reopened = world.resume(&id).state().await.unwrap();
        assert_eq!(reopened.messages, live.messages, "{kind:?}");
        let records = world.store.load(&id).unwrap();
        let replayed = SessionState::replay(id, live.project_dir.clone(), &records).state;
        assert_eq!(replayed.messages, live.messages, "{kind:?}");
    }
}

/// A call's 20 KB argument is under `max_argument_bytes`, so the request after it carries it;
/// once the turn's later reads need the room, compaction clears it like an old result.
#[tokio::test]
async fn compaction_clears_an_older_call_s_argument_when_the_window_needs_it() {
    let mut world = World::anthropic();
    world.approval = ApprovalMode::Edits;
    world.context_window = 20_000;
    let content = "the generated row, repeated to fill twenty kilobytes\n".repeat(400);
    assert!(content.len() > 20_000 && content.len() < 32 * 1024);
    world.mock.push(Reply::tool_call(
        "file_write",
        json!({"path": "gen.txt", "content": content}),
    ));
    // 6 KB each, in lines short enough that file_read shows them whole.
    let line = |i: usize| format!("{}\n", format!("{i}").repeat(59));
    for i in 0..8 {
        world
            .home
            .write_file(&format!("big{i}.txt"), &line(i).repeat(100));
        world.mock.push(Reply::tool_call(
            "file_read",
            json!({"path": format!("big{i}.txt")}),
        ));
    }
    world.mock.push(Reply::text("Read them all."));
    let handle = world.create();
    let events = turn(&handle, "write gen.txt, then read the big files").await;
    assert_eq!(completed(&events).as_deref(), Some("Read them all."));
    assert!(
        events
            .iter()
            .any(|e| matches!(e, SessionEvent::Compacted { .. })),
        "{events:?}"
    );

    let requests = world.mock.model_requests();
    let rows = |request: &crate::support::RecordedRequest| {
        request.raw_body.matches("the generated row").count()
    };
    assert_eq!(rows(&requests[1]), 400, "under the limit, it stays");
    let last = requests.last().unwrap();
    assert_eq!(rows(last), 0);
    assert_eq!(
        call_arguments(&last.body)[0],
        json!({
            "path": "gen.txt",
            "content": "[content of 20.7 KiB written to gen.txt by file_write; read the file \
                        to see it]",
        })
    );
    for request in &requests {
        assert_eq!(request.tool_use_ids(), request.tool_result_ids());
        let tokens = request.raw_body.len() / 4;
        assert!(tokens <= 16_000, "a request of ~{tokens} tokens");
    }
}
