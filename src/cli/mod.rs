//! Command-line front ends, one file per subcommand. Parsing happens here with clap; each
//! subcommand turns its arguments into library calls and renders the outcome. Errors from
//! the library arrive as typed errors and leave here as one message with a cause and a fix.

mod chat;
mod cleanup;
mod doctor;
mod lifecycle;
mod prompt;
mod render;
mod run;
mod sessions;
mod setup;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// tern: a terminal-first AI coding assistant.
///
/// With no subcommand, tern starts an interactive conversation in this terminal.
#[derive(Debug, Parser)]
#[command(name = "tern", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    model: setup::ModelArgs,
    /// Set when tern starts itself again after a config change: the session to go on with.
    #[arg(long, hide = true, value_name = "ID")]
    restarted_from: Option<String>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run one turn without the interactive interface and print the answer.
    Run(run::RunArgs),
    /// List and show stored sessions.
    #[command(subcommand)]
    Sessions(sessions::SessionsCommand),
    /// Show resolved paths and configuration, and check that each provider answers.
    Doctor(doctor::DoctorArgs),
    /// Look inside tern: the prompt the model would see next.
    #[command(subcommand)]
    Debug(DebugCommand),
}

#[derive(Debug, Subcommand)]
enum DebugCommand {
    /// Print the request the next turn would send, each layer labelled; nothing is sent.
    Prompt(prompt::PromptArgs),
}

/// How a command ended, for the process exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Success,
    /// The model turn failed; the session is intact.
    TurnFailed,
    /// The user stopped the turn.
    Interrupted,
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

/// Exit code for setup problems: bad flags, bad config, an unavailable database.
const EXIT_SETUP: u8 = 2;

/// Parses the command line, runs the command, and turns its result into an exit code.
pub fn main() -> ExitCode {
    ignore_file_size_signal();
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread()
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
            Some(Command::Debug(DebugCommand::Prompt(args))) => prompt::run(args).await,
            None => chat::run(cli.model, cli.restarted_from).await,
        }
    });
    // Tool tasks may still be winding down after a cancel; don't wait for them.
    runtime.shutdown_background();
    match result {
        Ok(Outcome::Success) => ExitCode::SUCCESS,
        Ok(Outcome::TurnFailed) => ExitCode::FAILURE,
        Ok(Outcome::Interrupted) => ExitCode::from(130),
        Err(err) => {
            eprintln!("tern: {err:#}");
            ExitCode::from(EXIT_SETUP)
        }
    }
}
