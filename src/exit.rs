//! The process exit codes of every `cvo` command (README, "Exit codes").

/// How a `cvo` command ended; the numeric value is the process exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Exit {
    /// Success (validate: no errors; warnings allowed).
    Success = 0,
    /// Errors found (validate) or one or more manifests failed (apply).
    Failed = 1,
    /// The input cannot be read, or the command line is wrong.
    Usage = 2,
    /// Applied, but requested deletions are still in progress or stuck; a wait timed out.
    InProgress = 3,
    /// Refused by a precondition or a safety rule (`--force` overrides where offered).
    Refused = 4,
}
