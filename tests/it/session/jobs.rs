//! Background shell jobs: `shell_execute { background: true }` returns a job id at once, the
//! job goes on beside the session, `job_output` reads it, `job_kill` stops it, the nudge
//! lists it while it runs, and the session's rest stops it.

use super::*;

fn results(world: &World, id: &SessionId) -> Vec<String> {
    tool_results(world, id)
        .into_iter()
        .map(|(_, text)| text)
        .collect()
}

#[tokio::test]
async fn a_background_job_runs_beside_the_session_until_it_is_stopped() {
    let mut world = World::anthropic();
    world.approval = ApprovalMode::All;
    world.mock.push(Reply::tool_call(
        "shell_execute",
        json!({"command": "echo started; sleep 30; echo never", "background": true}),
    ));
    world.mock.push(Reply::text("Started it."));
    world
        .mock
        .push(Reply::tool_call("job_output", json!({"job_id": 1})));
    world.mock.push(Reply::text("It runs."));
    world
        .mock
        .push(Reply::tool_call("job_kill", json!({"job_id": 1})));
    world.mock.push(Reply::text("Stopped."));
    world
        .mock
        .push(Reply::tool_call("job_output", json!({"job_id": 1})));
    world.mock.push(Reply::text("It ended."));
    let handle = world.create();
    let started = std::time::Instant::now();
    turn(&handle, "start the server").await;
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the call returned at once"
    );
    let first = results(&world, handle.id()).remove(0);
    let value: Value = serde_json::from_str(&first).expect(&first);
    assert_eq!(
        (value["job_id"].as_u64(), value["state"].as_str()),
        (Some(1), Some("running"))
    );
    // Its log fills while the session goes on.
    let log = std::path::PathBuf::from(value["log_dir"].as_str().unwrap()).join("job-1.log");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !std::fs::read_to_string(&log).is_ok_and(|text| text.contains("started")) {
        assert!(
            std::time::Instant::now() < deadline,
            "the job never printed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    turn(&handle, "how is it?").await;
    let output = results(&world, handle.id()).remove(1);
    assert!(output.contains("running for"), "{output}");
    assert!(output.contains("started"), "{output}");
    // The nudge of that turn listed it.
    let asked = world.mock.model_requests()[2].nudges().join("\n");
    assert!(asked.contains("[active-background-jobs]"), "{asked}");
    assert!(
        asked.contains("job 1: echo started; sleep 30; echo never"),
        "{asked}"
    );
    turn(&handle, "stop it").await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        turn(&handle, "and now?").await;
        let last = results(&world, handle.id()).pop().unwrap();
        if last.contains("killed by signal") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{last}");
        world
            .mock
            .push(Reply::tool_call("job_output", json!({"job_id": 1})));
        world.mock.push(Reply::text("Still going."));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Another session sees none of it.
    let other = world.create();
    world
        .mock
        .push(Reply::tool_call("job_output", json!({"job_id": 1})));
    world.mock.push(Reply::text("No such job."));
    turn(&other, "peek").await;
    let refused = tool_results(&world, other.id()).remove(0);
    assert!(refused.0 && refused.1.contains("no job 1"), "{refused:?}");
}
