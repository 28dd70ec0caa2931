//! The prompt's layers for a turn: the IO half. Before a turn's first model call, tier A is
//! rebuilt from its files and journaled only if it changed, tier B is rendered if this
//! audience has none yet or tier A changed (and journaled if it differs), and the nudge is gathered fresh (time, git under
//! its budget). The `prompt` module turns the journaled layers into each request. Every layer
//! and the tools come in the size the conversation model's window calls for
//! ([`prompt_size`]).

use super::deps::SessionDeps;
use super::envelope::SessionDirs;
use super::input::UserInput;
use super::state::SessionState;
use crate::agents::Definitions;
use crate::context::{
    CurrentTime, DurableContext, GIT_BUDGET, IdentityFiles, WorkingContext, project_instructions,
    repo_map,
};
use crate::domain::Audience;
use crate::llm::{ChatRequest, ModelRoute, ToolSpec};
use crate::prompt::{
    self, IndexEntry, NudgeSources, PromptSize, RequestFrame, StaticSources, SystemSources,
    TurnNotes,
};
use crate::store::JournalEvent;
use crate::tools::NOT_IN_SMALL_WINDOW;
use crate::tools::ToolRegistry;
use crate::tools::agents::PARENT_ONLY;
use std::borrow::Cow;
use std::path::Path;
use std::sync::Arc;

/// The size of every layer of this session's prompt: from the conversation model's window,
/// so it stays the same, and the cached prefix with it, for as long as the window does.
pub fn prompt_size(deps: &SessionDeps) -> PromptSize {
    PromptSize::for_window(deps.client.primary.context_window())
}

/// The tools `audience` may call, in this session's prompt size.
pub fn tool_specs(deps: &SessionDeps, audience: Audience) -> Vec<ToolSpec> {
    tool_specs_for(deps, audience, prompt_size(deps))
}

/// The tools `audience` may call, described for a prompt of `size`: a turn whose server
/// shows a window smaller than configured sends the small window's.
pub fn tool_specs_for(deps: &SessionDeps, audience: Audience, size: PromptSize) -> Vec<ToolSpec> {
    prompt::tool_specs(&offered(deps, size), audience, size)
}

/// Whether the session may send subagents: the session service runs them here, and the
/// window is not so small that their tools and list would crowd it. A subagent's own tools
/// never include them.
fn sends_subagents(deps: &SessionDeps, size: PromptSize) -> bool {
    deps.agents
        .get()
        .is_some_and(|runs| runs.strong_count() > 0)
        && !size.is_compact()
}

/// The tools the session offers: its own, less the subagent tools where it may not send any,
/// and less the job tools in a small window (whose fixed prompt must stay small; a job can
/// still be started, and read from its log).
fn offered(deps: &SessionDeps, size: PromptSize) -> Cow<'_, ToolRegistry> {
    let mut left_out: Vec<&str> = Vec::new();
    if !sends_subagents(deps, size) {
        left_out.extend(PARENT_ONLY);
    }
    if size.is_compact() {
        left_out.extend(NOT_IN_SMALL_WINDOW);
    }
    if left_out.iter().all(|name| deps.tools.get(name).is_none()) {
        Cow::Borrowed(&deps.tools)
    } else {
        Cow::Owned(deps.tools.without(&left_out))
    }
}

/// The journal events that set up a turn's prompt, in order: tier A when its sources
/// changed, tier B when `audience` has none yet or it changed with tier A, and the turn's
/// nudge.
pub async fn prepare_turn(
    deps: &SessionDeps,
    dirs: &SessionDirs,
    temp_dir: &Path,
    state: &SessionState,
    audience: Audience,
    notes: &TurnNotes,
    time: CurrentTime,
) -> Vec<JournalEvent> {
    let mut events = Vec::new();
    let size = prompt_size(deps);
    let identity = IdentityFiles::load(&deps.identity_dir);
    let instructions = match audience {
        Audience::Public => None,
        Audience::Team | Audience::Personal => project_instructions(&state.project_dir),
    };
    let system = match &state.subagent {
        Some(role) => prompt::subagent_prompt(
            audience,
            &role.agent,
            &role.instructions,
            instructions.as_ref(),
            size,
        ),
        None => prompt::system_prompt(
            audience,
            SystemSources {
                identity: &identity,
                instructions: instructions.as_ref(),
                size,
            },
        ),
    };
    let tier_a_changed = state.system_prompts.get(&audience) != Some(&system);
    if tier_a_changed {
        events.push(JournalEvent::SystemPromptSet {
            audience,
            text: system,
        });
    }
    let tier_b = state.static_contexts.get(&audience);
    // A map that was not ready for the last tier B is taken up once, between turns.
    let map_pending = tier_b.is_some_and(|text| text.contains(repo_map::MAP_PENDING));
    let tools_changed = tier_b.and_then(|text| changed_tools(deps, text, audience, size));
    if tier_b.is_none() {
        events.push(static_context_event(deps, dirs, temp_dir, state, audience));
    } else if tier_a_changed || map_pending || tools_changed.is_some() {
        // A new tier A already breaks the cached prefix at its start, so tier B after it may
        // change at no cost: that is how a change of prompt size reaches it. Journaled only
        // when it differs.
        let event = static_context_event(deps, dirs, temp_dir, state, audience);
        if matches!(&event, JournalEvent::StaticContextSet { text, .. } if Some(text) != tier_b) {
            events.push(event);
        }
    }
    let working = match audience {
        Audience::Public => None,
        Audience::Team | Audience::Personal => {
            let durable = DurableContext {
                project_dir: state.project_dir.clone(),
                cwd: state.cwd.clone(),
                recent_files: state.recent_files.iter().cloned().collect(),
            };
            let with_shell = audience == Audience::Personal;
            Some(WorkingContext::gather(durable, with_shell, GIT_BUDGET).await)
        }
    };
    let mut own_notes = available_subagents(deps, state, audience, notes);
    if tools_changed.is_some() {
        own_notes.get_or_insert_with(|| notes.clone()).tools_changed = tools_changed;
    }
    // Jobs that ended since the last turn (by themselves, stopped at a rest, or reaped with
    // an earlier tern) are told once, where the nudge says such things, their ends journaled.
    // Asked before those running: a job that ends between the two is in neither list (and
    // told next turn), never in both.
    if audience != Audience::Public {
        let ended = deps.jobs.ended_untold(&state.id);
        if !ended.is_empty() {
            own_notes.get_or_insert_with(|| notes.clone()).ended_jobs =
                ended.iter().map(|end| end.line.clone()).collect();
        }
        events.extend(ended.into_iter().map(|end| JournalEvent::JobEnded {
            id: end.id,
            how: end.how,
        }));
    }
    let jobs = deps.jobs.running(&state.id);
    if !jobs.is_empty() {
        own_notes
            .get_or_insert_with(|| notes.clone())
            .background_jobs = jobs;
    }
    let nudge = prompt::nudge(
        audience,
        NudgeSources {
            time: &time,
            working: working.as_ref(),
            notes: own_notes.as_ref().unwrap_or(notes),
            size,
        },
    );
    if let Some(text) = nudge {
        events.push(JournalEvent::NudgeAdded { text });
    }
    events
}

/// `notes` with the subagent definitions this session may send listed, when it may send any
/// (not a subagent itself, `spawn_agent` among its tools, runs served); `None`: as they are.
fn available_subagents(
    deps: &SessionDeps,
    state: &SessionState,
    audience: Audience,
    notes: &TurnNotes,
) -> Option<TurnNotes> {
    let may_send = state.subagent.is_none()
        && audience >= Audience::Team
        && deps.tools.get("spawn_agent").is_some()
        && sends_subagents(deps, prompt_size(deps));
    if !may_send || !notes.subagents.is_empty() {
        return None;
    }
    let definitions = Definitions::load(&deps.agents_dir(), &state.project_dir);
    let mut notes = notes.clone();
    notes.subagents = definitions
        .iter()
        .map(|definition| IndexEntry {
            name: definition.name.clone(),
            summary: definition.description.clone(),
        })
        .collect();
    Some(notes)
}

/// What changed in the tools since `tier_b` was written, as the note that says so; `None`
/// when they did not (or when tier B lists no tools: a small window's).
fn changed_tools(
    deps: &SessionDeps,
    tier_b: &str,
    audience: Audience,
    size: PromptSize,
) -> Option<String> {
    if size.is_compact() {
        return None;
    }
    let tools = prompt::tool_index(&offered(deps, size), audience);
    if tier_b.starts_with(&prompt::tools_section(&tools)) {
        return None;
    }
    let before = prompt::tools_in(tier_b);
    let added: Vec<&str> = tools
        .iter()
        .map(|tool| tool.name.as_str())
        .filter(|name| !before.contains(name))
        .collect();
    let removed: Vec<&str> = before
        .iter()
        .copied()
        .filter(|name| !tools.iter().any(|tool| tool.name == *name))
        .collect();
    let mut note = String::from("The tools changed since the last turn");
    if !added.is_empty() {
        note.push_str(&format!("; now also: {}", added.join(", ")));
    }
    if !removed.is_empty() {
        note.push_str(&format!("; gone: {}", removed.join(", ")));
    }
    note.push_str(". [tools] lists them as they are now.");
    Some(note)
}

/// Tier B for `audience`, rendered from the session's tools and folders.
pub fn static_context_event(
    deps: &SessionDeps,
    dirs: &SessionDirs,
    temp_dir: &Path,
    state: &SessionState,
    audience: Audience,
) -> JournalEvent {
    let tools = prompt::tool_index(&offered(deps, prompt_size(deps)), audience);
    let paths = prompt::SessionPaths {
        session_dir: dirs.session_dir.clone(),
        temp_dir: temp_dir.to_path_buf(),
        artifact_dir: dirs.artifact_dir.clone(),
        worktree_dir: dirs.worktree_dir.clone(),
        log_path: dirs.log_path.clone(),
    };
    let map = repo_map_for(deps, state, audience);
    let text = prompt::static_context(
        audience,
        StaticSources {
            session_id: state.id.as_str(),
            tools: &tools,
            skills: &[],
            memory: prompt::MEMORY_OFF,
            paths: &paths,
            size: prompt_size(deps),
            repo_map: map.as_deref(),
        },
    );
    JournalEvent::StaticContextSet { audience, text }
}

/// The repository map for tier B: none for the Public audience, for subagents (their thin
/// prompt) or with `repo_map_tokens = 0`; a 32nd of a small window at most. Centred on
/// the session's recent files and the names in its last person's messages.
fn repo_map_for(deps: &SessionDeps, state: &SessionState, audience: Audience) -> Option<String> {
    if audience == Audience::Public || state.subagent.is_some() {
        return None;
    }
    let tokens = match prompt_size(deps) {
        PromptSize::Full => deps.settings.repo_map_tokens,
        // A 32nd of a small window, so the fixed prompt stays under 30% of it.
        PromptSize::Compact { window } => deps.settings.repo_map_tokens.min(window / 32),
    };
    if tokens == 0 {
        return None;
    }
    let focus = map_focus(state);
    let cache_dir = repo_map::cache::dir_in(&deps.data_dir);
    // Waiting up to the budget: the async worker's other tasks move on meanwhile.
    crate::tools::off_async_threads(|| {
        repo_map::for_prompt(
            &state.project_dir,
            focus,
            tokens,
            &cache_dir,
            repo_map::MAP_BUDGET,
        )
    })
}

/// What a session's map centres on: its recent files (those in the project) and the code
/// names in its person's last three messages.
pub fn map_focus(state: &SessionState) -> repo_map::Focus {
    let files = state
        .recent_files
        .iter()
        .filter_map(|path| path.strip_prefix(&state.project_dir).ok())
        .map(|path| crate::tools::path_text::encode(path).into_owned())
        .collect();
    let said: Vec<String> = state
        .messages
        .iter()
        .rev()
        // A person's messages, not the tool results that also come as the user's.
        .filter(|message| {
            message.role == crate::domain::Role::User && !message.text().trim().is_empty()
        })
        .take(3)
        .map(|message| message.text())
        .collect();
    repo_map::Focus {
        files,
        names: said
            .iter()
            .flat_map(|text| repo_map::names_in(text))
            .collect(),
        words: said
            .iter()
            .flat_map(|text| repo_map::words_in(text))
            .collect(),
    }
}

/// The request for the next model call of a turn answered for `audience`.
pub fn request(
    state: &SessionState,
    audience: Audience,
    tools: Vec<ToolSpec>,
    route: &ModelRoute,
) -> ChatRequest {
    let tier = |layers: &std::collections::BTreeMap<Audience, String>| {
        layers.get(&audience).cloned().unwrap_or_default()
    };
    let system = vec![tier(&state.system_prompts), tier(&state.static_contexts)];
    let limits = route.limits();
    let frame = RequestFrame {
        model: &limits.model,
        max_output_tokens: limits.max_output_tokens,
        cache_key: state.id.as_str(),
    };
    let history = prompt::history_for(audience, &state.messages);
    prompt::build_request(system, &history, tools, &frame)
}

/// The request a turn for `input` would send first, and where its nudge sits in the
/// request's messages. Nothing is journaled: this is what `--print-prompt` shows.
pub async fn preview(
    deps: &SessionDeps,
    dirs: &SessionDirs,
    mut state: SessionState,
    mut input: UserInput,
    time: CurrentTime,
) -> (ChatRequest, Option<usize>) {
    // As a turn would have them: the MCP servers' tools, a prompt command's text.
    let deps = super::actor::with_mcp_tools(Arc::new(deps.clone()), &state.project_dir).await;
    let deps = deps.as_ref();
    if let Some(hub) = &deps.mcp
        && crate::tools::mcp::prompt::named(&input.text).is_some()
    {
        input.text = match hub
            .prompt(&state.project_dir, &input.text, input.audience)
            .await
        {
            Ok(text) => text.into(),
            Err(err) => format!("(this prompt command would be refused: {err})").into(),
        };
    }
    let audience = input.audience;
    state.apply(&JournalEvent::InputAccepted {
        sender: input.sender,
        audience,
        kind: input.kind,
        text: prompt::quote_lookalikes(&input.text).into_owned(),
    });
    let temp_dir = dirs.planned_temp_dir();
    let notes = TurnNotes::default();
    for event in prepare_turn(deps, dirs, &temp_dir, &state, audience, &notes, time).await {
        state.apply(&event);
    }
    let tools = tool_specs(deps, audience);
    let request = request(&state, audience, tools, &deps.client.primary);
    // The nudge, when there is one, sits right before the latest user message.
    let nudge_at = request.messages.len().checked_sub(2).filter(|&i| {
        request.messages[i]
            .text()
            .starts_with(prompt::NUDGE_OPENING)
    });
    (request, nudge_at)
}
