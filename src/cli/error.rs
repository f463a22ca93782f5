//! Why a command ended early, and the one place that turns that into a message on stderr
//! (a plain line, or a JSON event in JSON mode) and an [`Exit`] code ([`CliError::report`],
//! called by [`super::main`] only).

use super::Console;
use crate::exit::Exit;

/// Why a command ended early: the exit code it carries, and what to tell the user (one
/// sentence in plain words, printed as `error: …`).
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The input cannot be read, or the command line is wrong ([`Exit::Usage`]).
    #[error("{0}")]
    Usage(String),
    /// The command failed ([`Exit::Failed`]): the cluster could not be reached or read, a
    /// request failed, stdout could not be written.
    #[error("{0}")]
    Failed(String),
    /// Several problems, each printed as its own `error:` line, and the exit code.
    #[error("{}", .0.join("; "))]
    Several(Vec<String>, Exit),
}

impl CliError {
    /// A usage error from anything that reads as a sentence.
    pub(crate) fn usage(message: impl std::fmt::Display) -> Self {
        CliError::Usage(message.to_string())
    }

    /// A failure from anything that reads as a sentence.
    pub(crate) fn failed(message: impl std::fmt::Display) -> Self {
        CliError::Failed(message.to_string())
    }

    /// The exit code of this error.
    pub(crate) fn exit(&self) -> Exit {
        match self {
            CliError::Usage(_) => Exit::Usage,
            CliError::Failed(_) => Exit::Failed,
            CliError::Several(_, exit) => *exit,
        }
    }

    /// Reports the error on `console` and returns its exit code: in text mode `error: …`
    /// lines (one per problem); in JSON mode one `ERROR` event per problem, with the exit code
    /// as the field `exit_code`, so that every line on stderr is JSON. The log filter
    /// (`CVO_LOG=off`) never hides them.
    pub(crate) fn report(&self, console: Console) -> Exit {
        let exit = self.exit();
        let lines = match self {
            CliError::Several(lines, _) => lines.clone(),
            other => vec![other.to_string()],
        };
        let exit_code = exit as u8;
        for line in lines {
            say!(console, error { exit_code }, "{line}");
        }
        exit
    }
}

impl From<Exit> for std::process::ExitCode {
    fn from(exit: Exit) -> Self {
        std::process::ExitCode::from(exit as u8)
    }
}
