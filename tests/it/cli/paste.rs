//! A paste of megabytes sent from the interface, in tmux: it arrives whole in the session's
//! artifact, the model gets the placeholder that names it, and the transcript shows it folded.

use super::tmux::Tmux;
use super::*;

#[test]
fn a_pasted_log_of_megabytes_is_kept_whole_and_the_model_gets_a_placeholder() {
    let cli = Cli::new();
    cli.mock.push(Reply::text("Read the log."));
    cli.mock.repeat(Reply::text("A log"));
    let tmux = Tmux::start(&cli, &[]);
    tmux.wait_for("message tern");
    let lines = 40_000;
    let log: String = (0..lines)
        .map(|i| format!("log line {i:06} {}\n", "x".repeat(40)))
        .collect();
    assert!(log.len() > 2_000_000);
    tmux.paste(&log);
    tmux.wait_for(&format!("[pasted {lines} lines"));
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("Read the log.");
    // Folded: the first and last lines, and how many are left out.
    assert!(screen.contains("log line 000000"), "{screen}");
    assert!(screen.contains("log line 039999"), "{screen}");
    assert!(
        screen.contains(&format!("… {} more lines", lines - 8)),
        "{screen}"
    );

    let sent = cli.mock.model_requests()[0].texts().join("\n");
    assert!(
        !sent.contains("log line 020000"),
        "the log is not in the request"
    );
    let artifact = std::path::PathBuf::from(
        sent.split_whitespace()
            .find(|word| word.contains("input-") && word.contains(".txt"))
            .map(|word| word.trim_matches(|c: char| !(c.is_alphanumeric() || "/-_.".contains(c))))
            .unwrap_or_else(|| panic!("the placeholder names the artifact: {sent}")),
    );
    let kept = std::fs::read_to_string(&artifact).expect("the artifact is there");
    assert_eq!(kept, log, "the artifact holds the paste whole");
}
