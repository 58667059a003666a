//! `crawlcache completions SHELL`: a completion script for bash, zsh, fish,
//! elvish or PowerShell, generated from the command line's definition
//! (`crawlcache::cli::Cli`, handed in) by `clap_complete`.

use crate::cli::error::CommandError;
use clap::Args;
use clap_complete::Shell;
use std::io::Write as _;
use std::process::ExitCode;

/// Arguments of `completions`.
#[derive(Args, Debug)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// Prints the script to stdout. It is generated in memory first:
/// `clap_complete` panics on a failed write, and a closed stdout should end
/// the output quietly.
/// `cmd` is the command line's definition (`Cli::command()`).
pub fn run(args: CompletionsArgs, mut cmd: clap::Command) -> Result<ExitCode, CommandError> {
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "crawlcache", &mut script);
    let _ = std::io::stdout().write_all(&script);
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn every_shell_gets_a_script_naming_the_subcommands() {
        for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
            let mut script = Vec::new();
            clap_complete::generate(
                shell,
                &mut crate::cli::Cli::command(),
                "crawlcache",
                &mut script,
            );
            let script = String::from_utf8(script).unwrap();
            for word in [
                "crawlcache",
                "serve",
                "completions",
                "defaults",
                "bundle",
                "--exit-code",
                "--dry-run",
            ] {
                assert!(script.contains(word), "{shell}: no {word} in\n{script}");
            }
        }
    }
}
