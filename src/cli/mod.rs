//! Command-line front ends, one file per subcommand. Parsing happens here with clap; each
//! subcommand turns its arguments into library calls and renders the outcome. Errors from
//! the library arrive as typed errors and leave here as one message with a cause and a fix.

mod channels;
mod chat;
mod cleanup;
mod doctor;
mod door;
mod first_run;
mod follow;
mod lifecycle;
pub(crate) mod mcp;
mod prompt;
mod render;
mod repair;
mod repo_map;
mod run;
mod serve;
mod sessions;
mod setup;
mod startup;
mod tui;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// tern: a terminal-first AI coding assistant.
///
/// With no subcommand, tern starts an interactive conversation in this terminal: the
/// full-screen interface, or one line per message when input or output is not a terminal.
#[derive(Debug, Parser)]
#[command(name = "tern", version, about, long_about = None, args_conflicts_with_subcommands = true)]
pub struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    model: setup::ModelArgs,
    /// Continue the latest session of this folder.
    #[arg(short = 'c', long = "continue", conflicts_with = "resume")]
    r#continue: bool,
    /// Resume a session: the one with this id (a unique prefix is enough), or choose from a
    /// list when no id is given.
    #[arg(short = 'r', long, value_name = "ID", num_args = 0..=1, default_missing_value = "")]
    resume: Option<String>,
    /// A first message to send as tern starts.
    #[arg(value_name = "PROMPT")]
    prompt: Option<String>,
    /// Set when tern starts itself again after a config change: the session to go on with.
    #[arg(long, hide = true, value_name = "ID")]
    restarted_from: Option<String>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run one turn without the interactive interface and print the answer.
    ///
    /// The prompt comes from the argument or, without one, from standard input. The session
    /// is stored like any other: continue it with `tern run --continue` or `--session ID`,
    /// or in the interface with `tern -c` or `tern -r ID`.
    Run(run::RunArgs),
    /// List, show and clean up stored sessions.
    #[command(subcommand)]
    Sessions(sessions::SessionsCommand),
    /// Check the setup: where tern keeps its files, the database, the resolved config, the
    /// configured providers and the local model servers.
    ///
    /// Exits with 0 when a configured provider answers, else with 1 after saying what to do
    /// next.
    Doctor(doctor::DoctorArgs),
    /// Own the sessions with no interface: serve them to other tern processes and run the
    /// configured chat channels (Slack, Discord, Mattermost, webhooks).
    Serve(serve::ServeArgs),
    /// Show the chat channels of the running tern.
    #[command(subcommand)]
    Channels(channels::ChannelsCommand),
    /// Manage MCP servers: list them with their tools, add, remove, approve a project's.
    #[command(subcommand)]
    Mcp(mcp::McpCommand),
    /// Look inside tern: the request the model would get next, a directory's repository map.
    #[command(subcommand)]
    Debug(DebugCommand),
}

#[derive(Debug, Subcommand)]
enum DebugCommand {
    /// Print the request the next turn would send, each layer labelled; nothing is sent.
    Prompt(prompt::PromptArgs),
    /// Print the repository map of a directory and the time each stage took.
    RepoMap(repo_map::RepoMapArgs),
}

/// How a command ended, for the process exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Success,
    /// The model turn failed; the session is intact.
    TurnFailed,
    /// The user stopped the turn.
    Interrupted,
    /// The loop guard ended the turn quietly: the answer stands, the work may be unfinished.
    GuardEnded,
}

/// The exit code of a `tern run` whose turn the loop guard ended: neither a success a script
/// may build on nor a failure (the session is fine and the answer was printed).
pub const EXIT_GUARD_ENDED: u8 = 3;

/// `tern` without a subcommand: the full-screen interface in a terminal, the line mode
/// otherwise (pipes, scripts, tests).
async fn interactive(cli: Cli) -> anyhow::Result<Outcome> {
    use std::io::IsTerminal;
    let terminal = std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    let pick = cli.resume.as_deref() == Some("");
    let launch = tui::LaunchArgs {
        model: cli.model,
        r#continue: cli.r#continue,
        pick,
        resume: cli.resume.filter(|id| !id.is_empty()),
        restarted_from: cli.restarted_from,
        prompt: cli.prompt,
    };
    if terminal {
        return tui::run(launch).await;
    }
    if launch.pick {
        anyhow::bail!(
            "`tern -r` without an id chooses from a list, which needs a terminal; name the \
             session (`tern -r ID`, ids from `tern sessions list`)"
        );
    }
    chat::run(launch).await
}

/// A write past the file-size limit (`ulimit -f`) would kill the process with SIGXFSZ;
/// ignored, it fails with EFBIG like a full disk, which the store reports and recovers from.
fn ignore_file_size_signal() {
    // SAFETY: setting a signal's disposition to SIG_IGN has no preconditions and runs before
    // any other thread exists.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
}

/// Tunes glibc's allocator for a process that idles small and now and then holds megabytes.
///
/// Every thread's allocations go to two arenas rather than glibc's eight per core. tern's
/// few threads (the UI, the picker's search, the highlighter's warm-up, blocking tasks)
/// rarely allocate at the same moment, and each arena keeps its own freed pages, which made
/// the process several MiB larger than what it holds; but the repository map parses on two
/// threads that allocate all the time, and with one arena they queued on its lock (a
/// 570-file map took 1.7x as long). glibc fixes the limit at the first thread's start.
///
/// Blocks of [`MMAP_FROM`] or more are mapped on their own. Left to itself glibc raises that
/// bound to the largest block freed so far (up to 32 MiB), so after one paste of megabytes
/// every later big buffer came from the heap, grew by copying and, once freed, stayed in the
/// process: a 10 MB paste left more than twice its size behind. Mapped blocks grow in place
/// and go back to the system when freed.
fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes the allocator's tuning; called before any other thread
    // exists.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_FROM);
    }
}

/// Size from which a block gets its own mapping (see [`tune_allocator`]).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MMAP_FROM: libc::c_int = 256 * 1024;

/// Exit code for setup problems: bad flags, bad config, an unavailable database.
const EXIT_SETUP: u8 = 2;

/// Longest the exit waits for blocking work still running.
const SHUTDOWN_BOUND: std::time::Duration = std::time::Duration::from_millis(500);

/// Parses the command line, runs the command, and turns its result into an exit code.
pub fn main() -> ExitCode {
    ignore_file_size_signal();
    tune_allocator();
    let cli = Cli::parse();
    // Before the runtime starts any thread: the scrub changes the process environment.
    startup::prepare();
    // One TLS crypto provider for every client the process builds: providers, MCP servers
    // and the chat channels' HTTP and websocket connections.
    crate::tls::install_crypto_provider();
    // Two workers: a journal write (an fsync) or a read asked of another tern blocks one of
    // them, never the other sessions or the interface (`block_in_place` hands its tasks on).
    // Their threads (the actors acknowledging inputs, the blocking ones committing) wake
    // for short work a person waits on: they ask for a short time slice, which the threads
    // they start inherit; turns and runs run on runtimes of their own with the default one
    // (`session::background`), as does the interface on this thread.
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .on_thread_start(|| {
            crate::priority::favour_latency();
        })
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("tern: could not start the async runtime: {err}");
            return ExitCode::from(EXIT_SETUP);
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Some(Command::Run(args)) => run::run(args).await,
            Some(Command::Sessions(command)) => sessions::run(command).await,
            Some(Command::Doctor(args)) => doctor::run(args).await,
            Some(Command::Serve(args)) => serve::run(args).await,
            Some(Command::Channels(command)) => channels::run(command).await,
            Some(Command::Mcp(command)) => mcp::run(command).await,
            Some(Command::Debug(DebugCommand::Prompt(args))) => prompt::run(args).await,
            Some(Command::Debug(DebugCommand::RepoMap(args))) => repo_map::run(args).await,
            None => interactive(cli).await,
        }
    });
    // Every task is dropped, the subagent sessions' first, so the store closes cleanly (its lazy commits made durable);
    // blocking work still running (a tool winding down after a cancel) is waited for a
    // moment, not for ever.
    crate::session::background::shutdown(SHUTDOWN_BOUND);
    runtime.shutdown_timeout(SHUTDOWN_BOUND);
    match result {
        Ok(Outcome::Success) => ExitCode::SUCCESS,
        Ok(Outcome::TurnFailed) => ExitCode::FAILURE,
        Ok(Outcome::Interrupted) => ExitCode::from(130),
        Ok(Outcome::GuardEnded) => ExitCode::from(EXIT_GUARD_ENDED),
        Err(err) => {
            eprintln!("tern: {err:#}");
            ExitCode::from(EXIT_SETUP)
        }
    }
}
