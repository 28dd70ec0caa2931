//! Who joins a running turn, through a real session.

use super::*;
use pretty_assertions::assert_eq;
use tern::domain::{Audience, InputKind, Sender, TurnStop};

fn from(id: &str, kind: InputKind, trusted: bool, text: &str) -> UserInput {
    UserInput {
        sender: Sender {
            id: id.into(),
            name: id.into(),
            automated: kind != InputKind::Person,
            trusted,
        },
        audience: Audience::Personal,
        kind,
        text: text.into(),
        approval: None,
        touched: Vec::new(),
    }
}

/// A reminder, the kind of automated input that starts turns of its own.
fn reminder() -> UserInput {
    from(
        "cron",
        InputKind::Reminder,
        true,
        "reminder: check the build",
    )
}

/// Sends `first`, then `second` while the turn `first` started is still in its first model
/// call (the mock holds that reply back), and collects events until `turns` turns ended.
async fn overlapping(
    handle: &SessionHandle,
    first: UserInput,
    second: UserInput,
    turns: usize,
) -> Vec<SessionEvent> {
    let mut events = handle
        .subscribe(OutputFilter::ALL)
        .await
        .expect("subscribe");
    handle.send(first).await.expect("first accepted");
    let sender = handle.clone();
    let second = tokio::spawn(async move { sender.send(second).await });
    let seen = until_turns_end(&mut events, turns).await;
    second.await.expect("joined").expect("second accepted");
    handle.state().await.expect("idle");
    seen
}

/// The mock holds the first reply, a tool call, long enough for a second input to arrive.
fn slow_tool_call(world: &World) {
    world.mock.push(
        Reply::tool_call("glob", json!({"pattern": "*.txt"}))
            .delay_before(Duration::from_millis(300)),
    );
}

#[tokio::test]
async fn the_same_persons_new_message_joins_at_the_next_batch_boundary() {
    let world = World::anthropic();
    slow_tool_call(&world);
    world.mock.push(Reply::text("saw both"));
    let handle = world.create();
    let events = overlapping(
        &handle,
        UserInput::local("list the text files"),
        UserInput::local("and count them"),
        1,
    )
    .await;
    assert_eq!(
        stops(&events),
        [(TurnStop::Completed, "saw both".to_owned())]
    );
    let requests = world.mock.model_requests();
    assert_eq!(requests.len(), 2);
    let texts = requests[1].texts();
    assert_eq!(texts.last().unwrap(), "and count them", "{texts:?}");
    // The joined input is journaled after the batch's results.
    let kinds: Vec<&str> = journal(&world, handle.id())
        .iter()
        .filter_map(|e| match e {
            JournalEvent::InputAccepted { text, .. } => Some(if text == "and count them" {
                "joined"
            } else {
                "first"
            }),
            JournalEvent::ToolResults { .. } => Some("results"),
            _ => None,
        })
        .collect();
    assert_eq!(kinds, ["first", "results", "joined"]);
}

#[tokio::test]
async fn another_persons_message_and_automated_input_wait_for_their_own_turn() {
    for second in [
        from("bob", InputKind::Person, true, "bob here"),
        from("local", InputKind::Reminder, true, "reminder: stand-up"),
    ] {
        let world = World::anthropic();
        slow_tool_call(&world);
        world.mock.push(Reply::text("first done"));
        world.mock.push(Reply::text("second done"));
        let handle = world.create();
        let events = overlapping(&handle, UserInput::local("list files"), second.clone(), 2).await;
        assert_eq!(
            stops(&events),
            [
                (TurnStop::Completed, "first done".to_owned()),
                (TurnStop::Completed, "second done".to_owned())
            ]
        );
        let requests = world.mock.model_requests();
        assert!(!requests[1].texts().iter().any(|t| *t == *second.text));
        assert_eq!(requests[2].texts().last().unwrap(), &*second.text);
    }
}

#[tokio::test]
async fn a_trusted_person_ends_an_automated_turn_after_its_batch_and_is_told_why() {
    let world = World::anthropic();
    slow_tool_call(&world);
    world.mock.push(Reply::text("answer to the person"));
    let handle = world.create();
    let events = overlapping(
        &handle,
        reminder(),
        from("ada", InputKind::Person, true, "what is the status?"),
        2,
    )
    .await;
    let ended = stops(&events);
    assert_eq!(ended[0].0, TurnStop::InterruptedByPerson);
    assert_eq!(
        ended[1],
        (TurnStop::Completed, "answer to the person".to_owned())
    );
    // The automated turn made no call after its batch; the person's first call carries the
    // note that it stopped unfinished.
    let requests = world.mock.model_requests();
    assert_eq!(requests.len(), 2);
    let nudge = requests[1].nudges().pop().unwrap();
    assert!(nudge.contains("\n\n[interrupted-automation]\n"), "{nudge}");
    assert_eq!(requests[0].nudges().len(), 1);
    assert!(!requests[0].nudges()[0].contains("[interrupted-automation]"));
}

#[tokio::test]
async fn an_untrusted_person_never_ends_a_turn() {
    let world = World::anthropic();
    slow_tool_call(&world);
    world.mock.push(Reply::text("automation done"));
    world.mock.push(Reply::text("answer to eve"));
    let handle = world.create();
    let events = overlapping(
        &handle,
        reminder(),
        from("eve", InputKind::Person, false, "hello?"),
        2,
    )
    .await;
    assert_eq!(
        stops(&events),
        [
            (TurnStop::Completed, "automation done".to_owned()),
            (TurnStop::Completed, "answer to eve".to_owned())
        ]
    );
}

#[tokio::test]
async fn people_who_interrupt_an_automated_turn_go_in_the_order_they_wrote() {
    let world = World::anthropic();
    slow_tool_call(&world);
    world.mock.push(Reply::text("to ada"));
    world.mock.push(Reply::text("to bob"));
    let handle = world.create();
    let mut events = handle
        .subscribe(OutputFilter::ALL)
        .await
        .expect("subscribe");
    handle.send(reminder()).await.expect("accepted");
    let (one, two) = (handle.clone(), handle.clone());
    // `join!` polls Ada's send first, so hers reaches the session first; Bob's right after,
    // both while the automated turn still waits for its reply.
    let both = tokio::spawn(async move {
        tokio::join!(
            one.send(from("ada", InputKind::Person, true, "from ada")),
            two.send(from("bob", InputKind::Person, true, "from bob"))
        )
    });
    let seen = until_turns_end(&mut events, 3).await;
    let (ada, bob) = both.await.unwrap();
    ada.expect("ada accepted");
    bob.expect("bob accepted");
    let ended = stops(&seen);
    assert_eq!(ended[0].0, TurnStop::InterruptedByPerson);
    assert_eq!(ended[1], (TurnStop::Completed, "to ada".to_owned()));
    assert_eq!(ended[2], (TurnStop::Completed, "to bob".to_owned()));
    // Only the first turn after the automated one carries the note.
    let requests = world.mock.model_requests();
    assert!(
        requests[1]
            .nudges()
            .pop()
            .unwrap()
            .contains("[interrupted-automation]")
    );
    assert!(
        !requests[2]
            .nudges()
            .pop()
            .unwrap()
            .contains("[interrupted-automation]")
    );
}

/// The niceness of the process a turn's `shell_execute` starts for `input`.
async fn niceness_of_a_command_started_for(world: &World, input: UserInput) -> i32 {
    world.mock.push(Reply::tool_call(
        "shell_execute",
        json!({"command": "nice"}),
    ));
    world.mock.push(Reply::text("done"));
    let handle = world.create();
    let input = UserInput {
        approval: Some(tern::tools::ApprovalMode::All),
        ..input
    };
    turn_with(&handle, input).await;
    let results = tool_results(world, handle.id());
    let (failed, output) = results.first().expect("the command ran");
    assert!(!failed, "{output}");
    output
        .lines()
        .find_map(|line| line.trim().parse().ok())
        .unwrap_or_else(|| panic!("no niceness in {output:?}"))
}

#[tokio::test]
async fn an_automated_input_s_turn_yields_the_cores_to_a_persons() {
    let world = World::anthropic();
    let persons = niceness_of_a_command_started_for(&world, UserInput::local("how nice?")).await;
    let automated = niceness_of_a_command_started_for(&world, reminder()).await;
    // What the turn of a reminder starts runs ten nice steps lower (nice values stop at
    // 19), however many threads it went through on its way.
    assert_eq!(
        automated,
        (persons + 10).min(19),
        "a person's turn ran at {persons}, an automated one at {automated}"
    );
}
