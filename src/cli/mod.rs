//! The command line: argument parsing and the subcommands.

mod replay;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Predicts what a Kubernetes server-side apply will do to field ownership, before you deploy.
#[derive(Parser, Debug)]
#[command(name = "fieldguard", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run server-side-apply cases (the reference oracle's JSONL format) and print results.
    Replay(replay::ReplayArgs),
}

/// Runs the command line and returns the process exit code.
pub fn run() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Replay(a) => replay::run(a),
    }
}
