//! `tern sessions`: list stored sessions and show one's transcript.

use super::Outcome;
use super::cleanup::{self, CleanupMode};
use super::door;
use super::render::{clip, print_out, summarize_input};
use super::setup;
use crate::domain::{Answer, ContentBlock, TurnStop, Usage};
use crate::gateway::catalog::Catalog;
use crate::store::{JournalEvent, JournalRecord, SessionMeta};
use crate::tui::picker::text::{fit, pad};
use std::sync::Arc;

#[derive(Debug, clap::Subcommand)]
pub enum SessionsCommand {
    /// List sessions, most recently used first.
    List {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Show at most this many.
        #[arg(long, default_value_t = 100)]
        limit: usize,
        /// Show the archived sessions (left behind by a reset) instead.
        #[arg(long)]
        archived: bool,
    },
    /// Remove what is over the limits of [session.maintenance]: stale sessions, the oldest
    /// beyond max_entries, the oldest while over max_disk_bytes, and folders of no session.
    /// Reports only, unless --enforce (or mode = "enforce" in the config).
    Cleanup {
        /// Only report what would be removed, whatever the config's mode says.
        #[arg(long, conflicts_with = "enforce")]
        dry_run: bool,
        /// Remove it, whatever the config's mode says.
        #[arg(long)]
        enforce: bool,
    },
    /// Print a session's transcript.
    Show {
        /// Session id (a unique prefix is enough).
        id: String,
        /// Print the journal as JSON records instead of a transcript.
        #[arg(long)]
        json: bool,
    },
}

pub async fn run(command: SessionsCommand) -> anyhow::Result<Outcome> {
    let loaded = setup::load()?;
    if let SessionsCommand::Cleanup { dry_run, enforce } = command {
        let mode = match (dry_run, enforce) {
            (true, _) => CleanupMode::DryRun,
            (_, true) => CleanupMode::Enforce,
            _ => CleanupMode::FromConfig,
        };
        return cleanup::run(&loaded, mode).await;
    }
    // Read through the owner when a tern process holds the store; the reads block, so they
    // run off the async threads.
    let catalog = door::catalog(&loaded.paths).await?;
    match command {
        SessionsCommand::Cleanup { .. } => {}
        SessionsCommand::List {
            json,
            limit,
            archived,
        } => {
            let sessions = read(&catalog, move |c| c.recent(limit, archived)).await?;
            let text = if json {
                serde_json::to_string_pretty(&sessions)? + "\n"
            } else if sessions.is_empty() {
                "No sessions yet. Start one with `tern run \"…\"` or `tern`.\n".to_owned()
            } else {
                table(&sessions, jiff::Timestamp::now())
            };
            print_out(&text)?;
        }
        SessionsCommand::Show { id, json } => {
            let meta = read(&catalog, move |c| c.resolve(&id)).await?;
            let wanted = meta.id.clone();
            let records = read(&catalog, move |c| c.journal(&wanted)).await?;
            let text = if json {
                serde_json::to_string_pretty(&records)? + "\n"
            } else {
                transcript(&meta, &records)
            };
            print_out(&text)?;
        }
    }
    Ok(Outcome::Success)
}

/// Runs a read of `catalog` on a blocking thread.
async fn read<T: Send + 'static>(
    catalog: &Arc<dyn Catalog>,
    work: impl FnOnce(&dyn Catalog) -> Result<T, String> + Send + 'static,
) -> anyhow::Result<T> {
    let catalog = catalog.clone();
    tokio::task::spawn_blocking(move || work(catalog.as_ref()))
        .await?
        .map_err(anyhow::Error::msg)
}

/// Cells the TITLE column takes, its `…` included when a title is cut.
const TITLE_CELLS: usize = 40;

/// The session list as aligned columns.
///
/// Titles are measured in terminal cells, as they are drawn: a CJK character or an emoji
/// takes two, and a cut title ends in `…` within the column, so PROJECT starts at the same
/// column on every row.
fn table(sessions: &[SessionMeta], now: jiff::Timestamp) -> String {
    let mut out = format!(
        "{:<10} {:<10} {:>6}  {} {}\n",
        "ID",
        "UPDATED",
        "INPUTS",
        pad("TITLE", TITLE_CELLS),
        "PROJECT"
    );
    let ids = unique_prefixes(sessions.iter().map(|m| m.id.as_str()));
    for (meta, id) in sessions.iter().zip(ids) {
        let title = if meta.title.is_empty() {
            "(untitled)"
        } else {
            &meta.title
        };
        // A chat channel's session says which channel it belongs to.
        let title = match meta.key.chat_channel() {
            Some(channel) => format!("{channel} · {title}"),
            None => title.to_owned(),
        };
        out.push_str(&format!(
            "{:<10} {:<10} {:>6}  {} {}\n",
            id,
            ago(meta.updated_at_ms, now),
            meta.input_count,
            pad(&fit(&title, TITLE_CELLS), TITLE_CELLS),
            meta.project_dir.display()
        ));
    }
    out
}

/// The shortest prefix of each id, at least 8 characters, that no other id in the list
/// shares (as git shortens commit ids). Ids made within the same minute share their first
/// eight characters, so a fixed length would not tell them apart.
pub(super) fn unique_prefixes<'a>(ids: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let ids: Vec<&str> = ids.collect();
    let mut sorted = ids.clone();
    sorted.sort_unstable();
    let common = |a: &str, b: &str| a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    ids.iter()
        .map(|id| {
            let at = sorted.binary_search(id).unwrap_or(0);
            let before = at.checked_sub(1).map_or(0, |i| common(id, sorted[i]));
            let after = sorted.get(at + 1).map_or(0, |next| common(id, next));
            let mut len = (before.max(after) + 1).max(8).min(id.len());
            // A prefix ending in the separator reads as a typo; take one more character.
            if id.as_bytes().get(len - 1) == Some(&b'-') {
                len = (len + 1).min(id.len());
            }
            id.get(..len).unwrap_or(id)
        })
        .collect()
}

/// "5m ago"-style age of a timestamp in milliseconds.
fn ago(at_ms: i64, now: jiff::Timestamp) -> String {
    let secs = (now.as_millisecond() - at_ms).max(0) / 1000;
    match secs {
        0..60 => format!("{secs}s ago"),
        60..3600 => format!("{}m ago", secs / 60),
        3600..86400 => format!("{}h ago", secs / 3600),
        _ => format!("{}d ago", secs / 86400),
    }
}

/// A readable transcript of a session's journal.
fn transcript(meta: &SessionMeta, records: &[JournalRecord]) -> String {
    let mut out = format!(
        "session {}\nproject {}\n",
        meta.id,
        meta.project_dir.display()
    );
    if !meta.title.is_empty() {
        out.push_str(&format!("title   {}\n", meta.title));
    }
    // Usage of the model calls since the last turn ended, for the turn's total.
    let mut turn = (0, Usage::default());
    for record in records {
        match &record.event {
            JournalEvent::InputAccepted { sender, text, .. } => {
                out.push_str(&format!("\n› {}: {}\n", sender.name, text.trim_end()));
            }
            JournalEvent::AssistantMessage { content, .. } => {
                for block in content {
                    match block {
                        ContentBlock::Text { text } if !text.trim().is_empty() => {
                            out.push_str(&format!("\n{}\n", text.trim_end()));
                        }
                        ContentBlock::ToolUse(call) => {
                            out.push_str(&format!(
                                "▸ {} {}\n",
                                call.name,
                                summarize_input(&call.input)
                            ));
                        }
                        _ => {}
                    }
                }
            }
            JournalEvent::ToolResults { results, .. } => {
                for result in results {
                    let mark = if result.is_error { "✗" } else { "✓" };
                    let first = result.content.lines().next().unwrap_or("");
                    out.push_str(&format!("  {mark} {}\n", clip(first, 100)));
                }
            }
            event @ JournalEvent::TurnFailed { message, .. } => {
                let stop = event.turn_stop().unwrap_or_default();
                out.push_str(&format!("  (turn failed, {stop}: {message})\n"));
                out.push_str(&turn_total(&std::mem::take(&mut turn)));
            }
            JournalEvent::TurnCompleted { stop } => {
                if *stop != TurnStop::Completed {
                    out.push_str(&format!("  (turn ended: {stop})\n"));
                }
                out.push_str(&turn_total(&std::mem::take(&mut turn)));
            }
            JournalEvent::Compacted {
                messages,
                dropped,
                results_cleared,
                notes,
            } => {
                let notes = if notes.is_some() {
                    "with notes"
                } else {
                    "without notes"
                };
                out.push_str(&format!(
                    "\n  ~ compacted: {results_cleared} old tool results cleared, {dropped} \
                     messages cut ({notes}), {} left\n",
                    messages.len()
                ));
            }
            JournalEvent::SystemPromptSet { audience, text } => {
                out.push_str(&format!(
                    "  · system prompt for the {} audience set ({} bytes)\n",
                    serde_json::to_value(audience)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_owned))
                        .unwrap_or_default(),
                    text.len()
                ));
            }
            JournalEvent::Message { message } => {
                out.push_str(&format!("\n{}\n", message.text().trim_end()));
            }
            JournalEvent::JobStarted { job } => {
                out.push_str(&format!(
                    "  · background job {}: {} (log {})\n",
                    job.id,
                    clip(&job.command, 100),
                    job.log.display()
                ));
            }
            JournalEvent::JobEnded { id, how } => {
                out.push_str(&format!("  · background job {id} ended: {how}\n"));
            }
            JournalEvent::SubagentRoleSet { role } => {
                out.push_str(&format!(
                    "  · subagent `{}`, run {} of session {}\n",
                    role.agent, role.run_id, role.parent
                ));
            }
            JournalEvent::Usage { model, usage } => {
                turn.0 += 1;
                turn.1.add(usage);
                out.push_str(&format!(
                    "  · {model}: input {} (cache read {}, cache write {}), output {}\n",
                    usage.input_tokens,
                    usage.cache_read_input_tokens,
                    usage.cache_creation_input_tokens,
                    usage.output_tokens
                ));
            }
            JournalEvent::ApprovalRequested { prompt, .. } => {
                out.push_str(&format!("  ? asked: {}\n", clip(prompt, 100)));
            }
            JournalEvent::ApprovalDecided { answer, grant, .. } => {
                let decided = match (answer, grant) {
                    (
                        Answer::Deny {
                            reason: Some(reason),
                        },
                        _,
                    ) => {
                        format!("declined: {}", clip(reason, 90))
                    }
                    (Answer::Deny { reason: None }, _) => "declined".to_owned(),
                    (_, Some(grant)) => format!("allowed, and from now on {grant}"),
                    _ => "allowed".to_owned(),
                };
                out.push_str(&format!("    {decided}\n"));
            }
            JournalEvent::TitleChanged { .. }
            | JournalEvent::WorkingDirectoryChanged { .. }
            | JournalEvent::FileTouched { .. }
            | JournalEvent::StaticContextSet { .. }
            | JournalEvent::MemoryCheckpoint { .. }
            | JournalEvent::Passivated { .. }
            | JournalEvent::TurnResumed { .. }
            | JournalEvent::NudgeAdded { .. }
            | JournalEvent::ToolCallsStarted { .. }
            | JournalEvent::ArgumentsShortened { .. } => {}
        }
    }
    out
}

/// The line that sums up a turn of several model calls: its tokens and how much of its
/// prompt the provider's cache served. Empty for a turn of one call, whose line says it all.
fn turn_total((calls, usage): &(usize, Usage)) -> String {
    if *calls < 2 {
        return String::new();
    }
    let prompt = usage.context_tokens();
    let reused = if prompt == 0 {
        0.0
    } else {
        usage.cache_read_input_tokens as f64 * 100.0 / prompt as f64
    };
    format!(
        "  = turn, {calls} calls: input {} (cache read {}, cache write {}), output {}; \
         {reused:.0}% of the prompt came from the cache\n",
        usage.input_tokens,
        usage.cache_read_input_tokens,
        usage.cache_creation_input_tokens,
        usage.output_tokens
    )
}

#[cfg(test)]
mod tests {
    use super::{table, unique_prefixes};
    use crate::domain::{SessionId, SessionKey};
    use crate::store::SessionMeta;
    use crate::tui::wrap::str_width;

    fn check(ids: &[&str], expected: &[&str]) {
        assert_eq!(unique_prefixes(ids.iter().copied()), expected);
    }

    #[test]
    fn ids_from_the_same_minute_get_longer_prefixes() {
        check(
            &[
                "01a228e6-34a6-7000-8000-000000000001",
                "01a228e6-35b1-7000-8000-000000000002",
                "01a228f0-0000-7000-8000-000000000003",
            ],
            &["01a228e6-34", "01a228e6-35", "01a228f0"],
        );
    }

    #[test]
    fn a_prefix_never_ends_at_the_separator() {
        check(
            &["01a228e6-34a6-7000", "01a228e7-34a6-7000"],
            &["01a228e6", "01a228e7"],
        );
        check(&["01a228e6-3", "01a228e6-4"], &["01a228e6-3", "01a228e6-4"]);
    }

    #[test]
    fn the_project_column_lines_up_after_wide_and_cut_titles() {
        let titles = [
            "short",
            // 40 characters exactly: fits, no cut.
            "a title of exactly forty characters long",
            // Longer than the column: cut, and the `…` stays inside it.
            "a title that goes on for far longer than forty characters do",
            // Wide characters take two cells each: 24 of them are 48 cells.
            "修复登录页面在移动端的布局问题并补充相应的单元测试用例",
            "🚀 ship the release notes 🎉 with emoji 🐛 and more text after",
            "",
        ];
        let metas: Vec<SessionMeta> = titles
            .iter()
            .enumerate()
            .map(|(i, title)| {
                let id =
                    SessionId::from_string(format!("01a228e{i}-34a6-7000-8000-00000000000{i}"));
                let mut meta = SessionMeta::new(
                    id.clone(),
                    SessionKey::cli(&id),
                    format!("/work/project-{i}").into(),
                    1_000,
                );
                meta.title = (*title).to_owned();
                meta
            })
            .collect();
        let now = jiff::Timestamp::from_millisecond(61_000).unwrap();
        let text = table(&metas, now);
        let columns: Vec<usize> = text
            .lines()
            .map(|line| {
                let at = line
                    .find("/work/project-")
                    .or_else(|| line.find("PROJECT"))
                    .unwrap_or_else(|| panic!("no project in {line:?}"));
                str_width(&line[..at])
            })
            .collect();
        assert_eq!(columns.len(), titles.len() + 1, "{text}");
        assert!(
            columns.iter().all(|c| *c == columns[0]),
            "{columns:?}\n{text}"
        );
        assert!(text.contains("forty characters long "), "{text}");
        assert!(text.contains("far longer tha…"), "{text}");
        assert!(text.contains("(untitled)"), "{text}");
    }
}
