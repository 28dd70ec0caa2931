//! The first-run screen, drawn at fixed sizes: what is found, what is missing, and what
//! each key did.

use super::settings;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use tern::tui::Theme;

#[test]
fn the_setup_screen() {
    use tern::tui::setup::{FoundServer, Note, SetupScreen};
    let short = "no model provider is configured. Any one of these works:\n  - export ANTHROPIC_API_KEY=<key> for Anthropic\n  - export OLLAMA_HOST=127.0.0.1:11434 for a local Ollama";
    let config_file = std::path::PathBuf::from("/home/dev/.config/tern/config.toml");
    let setup = |problem: &str, exists: bool, servers: Vec<FoundServer>| {
        SetupScreen::new(problem.into(), config_file.clone(), exists, servers)
    };
    let screen_for = |setup: &SetupScreen, w, h| {
        let mut terminal = Terminal::new(TestBackend::new(w, h)).unwrap();
        terminal
            .draw(|frame| setup.render(frame, &Theme::default()))
            .unwrap();
        let buffer = terminal.backend().buffer().clone();
        (0..h)
            .map(|y| {
                (0..w)
                    .map(|x| buffer[(x, y)].symbol().to_owned())
                    .collect::<String>()
                    .trim_end()
                    .to_owned()
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    let found = vec![FoundServer {
        name: "Ollama".into(),
        base_url: "http://127.0.0.1:11434".into(),
        model: Some("qwen2.5-coder:7b".into()),
    }];
    // The whole message tern gives, whose list items wrap under their text.
    let full = tern::config::ConfigError::NoProvider {
        config_file: config_file.clone(),
    }
    .to_string();
    let mut written = setup(&full, false, Vec::new());
    written.note(Note::Done(format!(
        "Wrote an example config to {}: remove the # in front of one provider's lines there, \
         then run tern again.",
        config_file.display()
    )));
    written.config_written();
    let mut nothing = setup(short, true, Vec::new());
    nothing.note(Note::Problem(
        "No local server to use: tern offers one only while there is no config file.".into(),
    ));
    settings().bind(|| {
        let found_here = setup(short, false, found.clone());
        insta::assert_snapshot!("tui_setup_found_80x24", screen_for(&found_here, 80, 24));
        insta::assert_snapshot!("tui_setup_found_120x40", screen_for(&found_here, 120, 40));
        insta::assert_snapshot!(
            "tui_setup_none_80x24",
            screen_for(&setup(short, false, Vec::new()), 80, 24)
        );
        insta::assert_snapshot!(
            "tui_setup_full_80x30",
            screen_for(&setup(&full, false, Vec::new()), 80, 30)
        );
        insta::assert_snapshot!(
            "tui_setup_full_100x30",
            screen_for(&setup(&full, false, found), 100, 30)
        );
        insta::assert_snapshot!("tui_setup_written_80x30", screen_for(&written, 80, 30));
        // Too short for everything: the keys and the note stay.
        insta::assert_snapshot!("tui_setup_exists_60x12", screen_for(&nothing, 60, 12));
    });
}
