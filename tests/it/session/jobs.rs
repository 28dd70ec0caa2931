//! Background shell jobs: `shell_execute { background: true }` returns a job id at once, the
//! job goes on beside the session, `job_output` reads it, `job_kill` stops it, the nudge
//! lists it while it runs, and the session's rest stops it. Its end is told to the next turn
//! once; a later tern reaps what an earlier one left running.

use super::*;
use tern::domain::JobRecord;

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
    let log = std::path::PathBuf::from(value["log"].as_str().unwrap());
    assert!(log.ends_with("jobs/job-1.log"), "{}", log.display());
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

/// The nudge each model request so far added, the latest last.
fn nudges(world: &World) -> Vec<String> {
    world
        .mock
        .model_requests()
        .iter()
        .map(|request| request.nudges().pop().unwrap_or_default())
        .collect()
}

/// Waits for up to 10 s until `done`.
async fn until(what: &str, done: impl Fn() -> bool) {
    until_limit(what, Duration::from_secs(10), done).await;
}

/// Waits for up to `limit` until `done`.
async fn until_limit(what: &str, limit: Duration, done: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + limit;
    while !done() {
        assert!(std::time::Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Whether process `pid` is alive (a zombie counts as gone).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        !stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

/// The pid of the process of group `group` whose command line contains `marker`.
fn member(group: i32, marker: &str) -> Option<i32> {
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|entry| {
            let pid: i32 = entry.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let pgrp: i32 = stat
                .rsplit(')')
                .next()?
                .split_whitespace()
                .nth(2)?
                .parse()
                .ok()?;
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            (pgrp == group && String::from_utf8_lossy(&cmdline).contains(marker)).then_some(pid)
        })
}

fn journaled_jobs(world: &World, id: &SessionId) -> (Vec<JobRecord>, Vec<(u64, String)>) {
    let journal = world.store.load(id).unwrap();
    let started = journal
        .iter()
        .filter_map(|record| match &record.event {
            JournalEvent::JobStarted { job } => Some(job.clone()),
            _ => None,
        })
        .collect();
    let ended = journal
        .iter()
        .filter_map(|record| match &record.event {
            JournalEvent::JobEnded { id, how } => Some((*id, how.clone())),
            _ => None,
        })
        .collect();
    (started, ended)
}

#[tokio::test]
async fn a_jobs_end_is_told_to_the_next_turn_once_and_what_its_shell_left_counts_as_running() {
    let mut world = World::anthropic();
    world.approval = ApprovalMode::All;
    world.mock.push(Reply::tool_call(
        "shell_execute",
        json!({"command": "echo built", "background": true}),
    ));
    world.mock.push(Reply::text("Building."));
    // A shell that leaves a process behind and exits at once.
    world.mock.push(Reply::tool_call(
        "shell_execute",
        json!({"command": "sleep 300 & echo serving", "background": true}),
    ));
    world.mock.push(Reply::text("Serving."));
    world.mock.repeat(Reply::text("Noted."));
    let handle = world.create();
    turn(&handle, "build it").await;
    let (started, _) = journaled_jobs(&world, handle.id());
    assert_eq!(started.len(), 1, "the start is journaled");
    let job = &started[0];
    assert_eq!((job.id, job.command.as_str()), (1, "echo built"));
    assert!(
        job.log.with_extension("json").exists(),
        "its record lies beside its log"
    );
    // It ends by itself; the next turn hears so, with its log.
    until("the job never printed", || {
        std::fs::read_to_string(&job.log).is_ok_and(|text| text.contains("built"))
    })
    .await;
    // Reaped: the registry records the end as it reaps.
    until("the job was never reaped", || {
        !std::path::Path::new(&format!("/proc/{}", job.group)).exists()
    })
    .await;
    turn(&handle, "serve it").await;
    let told = nudges(&world).pop().unwrap();
    assert!(
        told.contains("job 1: echo built (exited with code 0; its log: "),
        "{told}"
    );
    let (_, ended) = journaled_jobs(&world, handle.id());
    assert_eq!(ended, vec![(1, "exited with code 0".to_owned())]);
    // The second job's shell has exited, but what it started runs: still a running job.
    let group = journaled_jobs(&world, handle.id()).0[1].group;
    until("the shell never exited", || !alive(group)).await;
    let sleeper = member(group, "sleep").expect("the sleep it left runs in its group");
    turn(&handle, "is it up?").await;
    let asked = nudges(&world).pop().unwrap();
    assert!(!asked.contains("echo built"), "told once only: {asked}");
    assert!(
        asked.contains("job 2: sleep 300 & echo serving (its shell exited with code 0; processes it started still run"),
        "{asked}"
    );
    world
        .mock
        .push(Reply::tool_call("job_kill", json!({"job_id": 2})));
    world.mock.push(Reply::text("Stopped."));
    turn(&handle, "stop it").await;
    let said = results(&world, handle.id()).pop().unwrap();
    assert!(said.contains("job 2 told to stop"), "{said}");
    until("what the shell left was never stopped", || !alive(sleeper)).await;
}

#[tokio::test]
async fn a_rest_stops_the_sessions_jobs_and_its_next_turn_hears_so() {
    let mut world = World::anthropic();
    world.approval = ApprovalMode::All;
    // Rest comes 1 s after the turn, plus the grace.
    world.settings.idle_timeout = Duration::from_secs(1);
    world.mock.push(Reply::tool_call(
        "shell_execute",
        json!({"command": "sleep 300", "background": true}),
    ));
    world.mock.push(Reply::text("Watching."));
    world.mock.repeat(Reply::text("Noted."));
    let handle = world.create();
    turn(&handle, "watch it").await;
    let job = journaled_jobs(&world, handle.id()).0.remove(0);
    assert!(alive(job.group));
    until_limit("the session never rested", Duration::from_secs(30), || {
        world
            .store
            .load(handle.id())
            .unwrap()
            .iter()
            .any(|record| matches!(record.event, JournalEvent::Passivated { .. }))
    })
    .await;
    until("the rest left the job running", || !alive(job.group)).await;
    let handle = world.resume(handle.id());
    turn(&handle, "back again").await;
    let told = nudges(&world).pop().unwrap();
    assert!(
        told.contains("job 1: sleep 300 (stopped when its session went to rest"),
        "{told}"
    );
}

#[tokio::test]
async fn a_job_an_earlier_tern_left_running_is_killed_and_reported_reaped_at_the_next_wake() {
    let mut world = World::anthropic();
    world.approval = ApprovalMode::All;
    world.mock.push(Reply::tool_call(
        "shell_execute",
        json!({"command": "sleep 300", "background": true}),
    ));
    world.mock.push(Reply::text("Started."));
    world.mock.repeat(Reply::text("Noted."));
    // The first tern stays as if it had died: nothing of it stops the job.
    let first = world.create();
    turn(&first, "start it").await;
    let job = journaled_jobs(&world, first.id()).0.remove(0);
    assert!(alive(job.group));
    // A crash lost the journal's record of the start: the one beside the log stands in.
    std::fs::write(
        job.log.with_file_name("job-7.json"),
        serde_json::to_vec(&JobRecord {
            id: 7,
            ..job.clone()
        })
        .unwrap(),
    )
    .unwrap();
    let second = world.resume(first.id());
    until("the leftover job was not killed", || !alive(job.group)).await;
    turn(&second, "what happened?").await;
    let told = nudges(&world).pop().unwrap();
    assert!(
        told.contains(
            "job 1: sleep 300 (reaped: the tern that started it stopped without ending it"
        ),
        "{told}"
    );
    assert!(told.contains("job 7: sleep 300 (reaped"), "{told}");
    // The log stays readable through job_output, and the next job takes the next number.
    world
        .mock
        .push(Reply::tool_call("job_output", json!({"job_id": 1})));
    world.mock.push(Reply::tool_call(
        "shell_execute",
        json!({"command": "true", "background": true}),
    ));
    world.mock.push(Reply::text("Read it."));
    turn(&second, "show its log").await;
    let shown = results(&world, second.id());
    assert!(
        shown[shown.len() - 2].contains("job 1 (sleep 300): reaped"),
        "{shown:?}"
    );
    assert!(shown[shown.len() - 1].contains("\"job_id\":8"), "{shown:?}");
    drop(first);
}
