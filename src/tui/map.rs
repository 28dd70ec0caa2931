//! `/map`: the repository map as the session sees its project now, asked of the session
//! service and shown as a notice.

use super::app::AppEvent;
use crate::domain::SessionId;
use crate::gateway::{MapShown, SessionService};
use std::path::PathBuf;
use tokio::sync::mpsc::UnboundedSender;

/// Asks for the map of `session`'s project (or of `project_dir` before there is a session),
/// centred also on `focus`, and shows it when it comes.
pub fn show(
    service: SessionService,
    session: Option<SessionId>,
    project_dir: PathBuf,
    focus: Vec<String>,
    tx: UnboundedSender<AppEvent>,
) {
    tokio::spawn(async move {
        let text = match service
            .repo_map(session.as_ref(), &project_dir, focus)
            .await
        {
            Ok(map) => text_of(&map),
            Err(err) => format!("could not make the repository map: {err}"),
        };
        let _ = tx.send(AppEvent::Notice(text));
    });
}

/// The notice: what the map is of and centred on, what it read, then the map.
pub fn text_of(map: &MapShown) -> String {
    let mut text = format!(
        "repository map of {} · {} tokens · {} files, {} definitions",
        map.project_dir.display(),
        map.tokens,
        map.files,
        map.definitions
    );
    if map.left_out > 0 {
        text.push_str(&format!(", {} left out", map.left_out));
    }
    text.push_str(&format!(" · {} ms\n", map.took_ms));
    if map.centre.is_empty() {
        text.push_str("centred on: nothing yet (the whole project, evenly)\n");
    } else {
        text.push_str(&format!("centred on: {}\n", map.centre.join(", ")));
    }
    if !map.in_prompt {
        text.push_str("(the prompt carries no map: [context] repo_map_tokens = 0)\n");
    }
    if map.text.is_empty() {
        text.push_str(&format!(
            "nothing to map: no definitions in {} files",
            crate::gateway::map::LANGUAGES
        ));
    } else {
        text.push_str(map.text.trim_end());
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(text: &str, in_prompt: bool) -> MapShown {
        MapShown {
            project_dir: PathBuf::from("/work/app"),
            text: text.to_owned(),
            tokens: 1024,
            in_prompt,
            centre: vec!["src/main.rs".into(), "parse_config".into()],
            files: 12,
            definitions: 80,
            left_out: 1,
            took_ms: 31,
        }
    }

    #[test]
    fn the_notice_says_what_the_map_is_of_then_shows_it() {
        assert_eq!(
            text_of(&shown("src/main.rs:\n1│fn main() {\n", true)),
            "repository map of /work/app · 1024 tokens · 12 files, 80 definitions, 1 left out \
             · 31 ms\ncentred on: src/main.rs, parse_config\nsrc/main.rs:\n1│fn main() {"
        );
        let off = text_of(&shown("", false));
        assert!(off.contains("repo_map_tokens = 0"), "{off}");
        assert!(off.ends_with("nothing to map: no definitions in Rust, Python, JavaScript, TypeScript, Go, Java, C, C++ and Bash files"), "{off}");
    }
}
