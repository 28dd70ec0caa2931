//! `tern run --print-prompt` and `tern debug prompt`: the request the next turn would send,
//! shown layer by layer (or as the provider's JSON body), so a user can see exactly what the
//! model sees. Nothing is sent and nothing is saved.

use super::Outcome;
use super::door;
use super::setup::{self, KeyCheck, ModelArgs, Which};
use crate::context::CurrentTime;
use crate::domain::{Audience, SessionId, SessionKey};
use crate::gateway::Runs;
use crate::prompt::describe_request;
use crate::session::{SessionDirs, SessionState, UserInput, preview};
use crate::store::SessionMeta;
use crate::tools::ApprovalMode;

/// What stands in for the message when none is given.
const PLACEHOLDER: &str = "(your next message)";

/// Show the request the next turn would send to the model, without sending or saving it.
#[derive(Debug, clap::Args)]
pub struct PromptArgs {
    /// The message the turn would answer (`-` reads it from standard input); a placeholder
    /// when omitted.
    prompt: Option<String>,
    /// Show the next turn of the most recent session of this project directory.
    #[arg(short, long, conflicts_with = "session")]
    r#continue: bool,
    /// Show the next turn of the session with this id (a unique prefix is enough).
    #[arg(long, value_name = "ID")]
    session: Option<String>,
    /// text: each layer labelled; json: the provider's request body as sent.
    #[arg(long, value_enum, default_value_t = PromptFormat::Text)]
    format: PromptFormat,
    /// Whom the turn answers: public (a thin prompt, no tools that touch this machine), team,
    /// or personal (you, at this terminal).
    #[arg(long, value_enum, default_value_t = AudienceArg::Personal)]
    audience: AudienceArg,
    #[command(flatten)]
    model: ModelArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum AudienceArg {
    Public,
    Team,
    Personal,
}

impl From<AudienceArg> for Audience {
    fn from(value: AudienceArg) -> Self {
        match value {
            AudienceArg::Public => Audience::Public,
            AudienceArg::Team => Audience::Team,
            AudienceArg::Personal => Audience::Personal,
        }
    }
}

/// How the request is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum PromptFormat {
    #[default]
    Text,
    Json,
}

/// `tern debug prompt`.
pub async fn run(args: PromptArgs) -> anyhow::Result<Outcome> {
    let which = Which {
        r#continue: args.r#continue,
        session: args.session,
    };
    let shown = Shown {
        format: args.format,
        audience: args.audience.into(),
    };
    print(args.prompt, which, shown, &args.model).await
}

/// How the request is shown, and for whom it is assembled.
#[derive(Debug, Clone, Copy)]
pub struct Shown {
    pub format: PromptFormat,
    pub audience: Audience,
}

/// Prints the request a turn for `prompt` would send first in the session `which` names (a
/// new one when it names none). Beside a running tern, that tern builds it.
pub async fn print(
    prompt: Option<String>,
    which: Which,
    shown: Shown,
    model: &ModelArgs,
) -> anyhow::Result<Outcome> {
    let loaded = setup::load()?;
    let text = match prompt.as_deref() {
        Some("-") => super::run::read_prompt(Some("-"))?,
        Some(text) => text.to_owned(),
        None => PLACEHOLDER.to_owned(),
    };
    let mut input = UserInput::local(text);
    input.audience = shown.audience;
    // The session's own model, or the one the flags name.
    let client_for = |found: Option<&SessionMeta>| {
        setup::model_client(&loaded, &model.or_session(found), KeyCheck::NotNeeded)
    };
    let (found, request, nudge_at) = match door::owner(&loaded.paths).await? {
        Some(owner) => {
            let found = which.find(&owner).await?;
            let here = setup::project_dir()?;
            let id = found.as_ref().map(|meta| &meta.id);
            let shown = owner.preview(id, &here, input).await?;
            (found, shown.request, shown.nudge_at)
        }
        None => {
            let store = setup::open_store(&loaded.paths)?;
            let found = which.find(store.as_ref()).await?;
            let client = client_for(found.as_ref())?;
            let data_dir = loaded.paths.data_dir.clone();
            let (state, dirs) = match &found {
                Some(meta) => {
                    let records = store.load(&meta.id)?;
                    let (dirs, _) = SessionDirs::locate(&data_dir, meta);
                    let state =
                        SessionState::replay(meta.id.clone(), meta.project_dir.clone(), &records)
                            .state;
                    (state, dirs)
                }
                None => {
                    let id = SessionId::generate();
                    let dirs = SessionDirs::new(&data_dir, &id, &SessionKey::cli(&id));
                    (SessionState::new(id, setup::project_dir()?), dirs)
                }
            };
            let deps = setup::session_deps(
                &loaded,
                store,
                client,
                ApprovalMode::Never,
                model.overrides(),
            );
            // What a served session is offered, though nothing here may start.
            let _runs = Runs::for_preview(&deps);
            let (request, nudge_at) = preview(&deps, &dirs, state, input, CurrentTime::now()).await;
            // Servers the preview started end with it.
            if let Some(hub) = &deps.mcp {
                hub.stop_all().await;
            }
            (found, request, nudge_at)
        }
    };
    let heading = match &found {
        Some(meta) => format!("next turn of session {}", meta.id),
        None => "first turn of a new session (not saved)".to_owned(),
    };
    // The provider that would encode it.
    let provider = client_for(found.as_ref())?.primary.provider.clone();
    let mut request = request;
    request.images = provider.takes_images();
    match shown.format {
        PromptFormat::Text => {
            println!(
                "The request tern would send for the {heading}, to {} ({}).",
                request.model,
                provider.name()
            );
            println!("Nothing was sent or saved.\n");
            print!("{}", describe_request(&request, nudge_at));
        }
        PromptFormat::Json => {
            let body = provider.wire_body(&request);
            println!("{}", serde_json::to_string_pretty(&body)?);
        }
    }
    Ok(Outcome::Success)
}
