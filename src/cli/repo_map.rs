//! `tern debug repo-map`: the repository map of a directory, as a session would get it, with
//! what each stage took.

use super::Outcome;
use crate::context::repo_map::{self, Focus};
use anyhow::Context;
use std::path::PathBuf;

/// Print the repository map of a directory (the current one by default): the files and
/// definitions that matter most, within a token budget, and the time each stage took.
#[derive(Debug, clap::Args)]
pub struct RepoMapArgs {
    /// The project's directory.
    dir: Option<PathBuf>,
    /// The map's budget in tokens (estimated as four bytes each).
    /// The default is the prompt's (`[context] repo_map_tokens`).
    #[arg(long, default_value_t = crate::config::SessionSettings::default().repo_map_tokens)]
    tokens: u64,
    /// What the map should centre on: a file (relative to the directory) or a name the
    /// conversation mentions; may be given several times.
    #[arg(long, value_name = "PATH|NAME")]
    focus: Vec<String>,
}

pub async fn run(args: RepoMapArgs) -> anyhow::Result<Outcome> {
    let dir = match args.dir {
        Some(dir) => dir,
        None => std::env::current_dir().context("could not read the current directory")?,
    };
    let root = dir.canonicalize().with_context(|| {
        format!(
            "{} is not a directory tern can read; give the project's directory",
            dir.display()
        )
    })?;
    if !root.is_dir() {
        anyhow::bail!("{} is a file; give the project's directory", root.display());
    }
    let mut focus = Focus::default();
    for item in args.focus {
        // A file in any spelling (`./src/lib.rs`, an absolute path) as the walk names it.
        let inside = root
            .join(&item)
            .canonicalize()
            .ok()
            .filter(|path| path.is_file())
            .and_then(|path| {
                path.strip_prefix(&root)
                    .ok()
                    .map(|relative| crate::tools::path_text::encode(relative).into_owned())
            });
        match inside {
            Some(relative) => focus.files.push(relative),
            None => focus.names.push(item),
        }
    }
    let tokens = args.tokens;
    // Without a home for the cache (no writable data directory), every file is read.
    let cache_dir = crate::config::Paths::from_env(super::startup::environment())
        .ok()
        .map(|paths| repo_map::cache::dir_in(&paths.data_dir));
    let map = tokio::task::spawn_blocking(move || {
        repo_map::build(&root, &focus, tokens, cache_dir.as_deref())
    })
    .await
    .context("the map's work stopped")?;
    print!("{}", map.text);
    if map.skipped.beyond_limit {
        eprintln!(
            "the walk stopped after {} files; give a smaller directory for a map of all of it",
            crate::context::repo_map::MAX_FILES
        );
    }
    let t = map.timings;
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1000.0;
    eprintln!(
        "{} files mapped, {} definitions ({} files read now, {} from the cache); left out: {} \
         over 1 MiB, {} binary, {} unreadable by tree-sitter, {} unreadable; about {} of \
         {tokens} tokens; walk {:.1} ms, cache {:.1} ms, parse {:.1} ms, rank {:.1} ms, \
         render {:.1} ms",
        map.files,
        map.definitions,
        map.reuse.parsed,
        map.reuse.reused,
        map.skipped.too_large,
        map.skipped.binary,
        map.skipped.unparsable,
        map.skipped.unreadable,
        crate::domain::estimate_tokens(&map.text),
        ms(t.walk),
        ms(t.cache),
        ms(t.parse),
        ms(t.rank),
        ms(t.render),
    );
    Ok(Outcome::Success)
}
