//! `/model` in the real binary: a name the provider does not list is refused with the listed
//! models that come close, asked of the provider without holding up the interface; a listed
//! one is switched to.

use super::tmux::Tmux;
use super::*;

#[test]
fn a_model_the_provider_does_not_list_is_refused_with_its_close_matches() {
    let cli = Cli::new();
    // The mock lists the models its script knows.
    cli.mock
        .push_for_model("claude-opus-4-1", Reply::text("Opus here."));
    cli.mock.repeat(Reply::text("A title"));
    let tmux = Tmux::start(&cli, &[]);
    tmux.wait_for("message tern");
    tmux.type_text("/model claude-opus-4.1");
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("has no model");
    assert!(
        screen.contains("anthropic has no model `claude-opus-4.1`; did you mean claude-opus-4-1?"),
        "{screen}"
    );
    assert!(
        cli.mock
            .model_questions()
            .iter()
            .any(|asked| asked == "GET /v1/models"),
        "{:?}",
        cli.mock.model_questions()
    );
    // A listed one is switched to.
    tmux.type_text("/model claude-opus-4-1");
    tmux.keys(&["Enter"]);
    tmux.wait_for("this session talks to claude-opus-4-1 (anthropic) from its next turn on");
    tmux.keys(&["C-d"]);
    tmux.wait_for("[tern exited 0]");
}
