//! What `--help` shows: each subcommand lists the options it takes, and nothing else.

use super::*;

fn help(args: &[&str]) -> String {
    let home = TernHome::new();
    let output = home
        .tern()
        .args(args)
        .arg("--help")
        .output()
        .expect("running tern");
    assert!(output.status.success(), "{}", stderr(&output));
    stdout(&output)
}

#[test]
fn model_flags_are_shown_where_they_apply_and_only_there() {
    for args in [&[][..], &["run"], &["serve"], &["debug", "prompt"]] {
        let text = help(args);
        assert!(
            text.contains("--provider <NAME>") && text.contains("--model <NAME>"),
            "tern {args:?} --help:\n{text}"
        );
    }
    for args in [
        &["sessions"][..],
        &["sessions", "list"],
        &["sessions", "show"],
        &["doctor"],
        &["channels", "status"],
        &["mcp", "list"],
        &["debug", "repo-map"],
    ] {
        let text = help(args);
        assert!(
            !text.contains("--provider") && !text.contains("--model"),
            "tern {args:?} --help:\n{text}"
        );
    }
}

#[test]
fn model_flags_still_work_where_they_apply_and_are_refused_elsewhere() {
    let cli = Cli::new();
    cli.mock.push(Reply::text("ok"));
    let output = cli.run(&["run", "--model", "picked-model", "hi"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(cli.mock.model_requests()[0].model(), Some("picked-model"));
    let output = cli.run(&["sessions", "list", "--model", "picked-model"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("unexpected argument '--model'"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn run_help_reads_as_a_user_reads_it() {
    let text = help(&["run"]);
    assert!(
        text.contains("never:") && text.contains("edits:") && text.contains("all:"),
        "{text}"
    );
    // `ask` needs someone to answer, so it is not offered; still parsed, it is refused
    // with the reason (`run_refuses_to_ask_with_nobody_to_answer`).
    assert!(
        !text.contains("ask:") && !text.contains("Accepted so that"),
        "{text}"
    );
}
