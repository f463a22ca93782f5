//! Everything the process writes to stderr, in one log format: the logs (tracing events,
//! filtered by `CVO_LOG` or `-v`), and what a command tells the person or program running it
//! — notes, warnings, errors, progress lines, the release's diagnostics, a panic.
//!
//! The second kind goes through a [`Console`] (and the [`say!`] macro): in text mode a plain
//! line as always (`note: …`, `warning: …`, `error: …`, rustc-style diagnostics); in JSON mode
//! one event of tracing's JSON format (`timestamp`, `level`, `fields` with `message`, `target`
//! [`TARGET`]) with the line's facts as fields. The log filter never hides them: `CVO_LOG=off`
//! silences the logs, never a fatal error. A command's report on stdout is not touched.
//!
//! [`init`] sets up the process's one subscriber and, in JSON mode, a panic hook that writes
//! the panic as one `ERROR` event instead of Rust's text.

use super::{GlobalArgs, LogFormat};
use crate::diagnostic::{Diagnostic, Severity};

/// The target of the events a [`Console`] writes in JSON mode (no module is named so): the
/// one target the log filter lets through whatever it says.
pub(crate) const TARGET: &str = "cvo::console";

/// Writes what a command says on stderr in the log format in force (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Console {
    format: LogFormat,
}

/// `say!(console, KIND {FIELDS}, "format", args…)`: one line on stderr through `console`,
/// KIND one of `note` (`note: …`, `INFO`), `warning` (`warning: …`, `WARN`), `error`
/// (`error: …`, `ERROR`) or `line` (the text as it is, `INFO`). The optional FIELDS, in
/// tracing's syntax (`digest = %d, tag`), are the JSON event's fields; text mode writes only
/// the message.
macro_rules! say {
    (@level note) => { tracing::Level::INFO };
    (@level warning) => { tracing::Level::WARN };
    (@level error) => { tracing::Level::ERROR };
    (@level line) => { tracing::Level::INFO };
    (@prefix note) => { "note: " };
    (@prefix warning) => { "warning: " };
    (@prefix error) => { "error: " };
    (@prefix line) => { "" };
    ($console:expr, $kind:ident $({ $($field:tt)+ })?, $($arg:tt)+) => {{
        let console: $crate::cli::console::Console = $console;
        if console.is_json() {
            tracing::event!(
                target: $crate::cli::console::TARGET,
                say!(@level $kind),
                $($($field)+,)?
                $($arg)+
            );
        } else {
            stderr_line!("{}{}", say!(@prefix $kind), format_args!($($arg)+));
        }
    }};
}

impl Console {
    /// A console writing in `format`.
    pub fn new(format: LogFormat) -> Self {
        Console { format }
    }

    /// JSON mode: every line on stderr is one JSON object.
    pub fn is_json(self) -> bool {
        self.format == LogFormat::Json
    }

    /// One diagnostic of the release: rustc-style text, or an event at its severity (`ERROR`,
    /// `WARN`, `INFO`) with the object and message as the message, and `rule`, `file`, `line`,
    /// `document` and `help` as fields.
    pub fn diagnostic(self, d: &Diagnostic) {
        if !self.is_json() {
            stderr_line!("{d}");
            return;
        }
        let message = match &d.object {
            Some(object) => format!("{object}: {}", d.message),
            None => d.message.clone(),
        };
        let file = crate::diagnostic::escaped_path(&d.location.file);
        let (line, document) = (d.location.line, d.location.document);
        let help = d.help.as_deref();
        macro_rules! event {
            ($level:expr) => {
                tracing::event!(target: TARGET, $level, rule = d.rule, %file, line, document, help, "{message}")
            };
        }
        match d.severity {
            Severity::Error => event!(tracing::Level::ERROR),
            Severity::Warning => event!(tracing::Level::WARN),
            Severity::Note => event!(tracing::Level::INFO),
        }
    }

    /// Each of `diagnostics` once, in order (a release read in several profiles repeats
    /// the ones all of them share).
    pub fn diagnostics<'a>(self, diagnostics: impl IntoIterator<Item = &'a Diagnostic>) {
        let mut printed = std::collections::BTreeSet::new();
        for d in diagnostics {
            if printed.insert(d.to_string()) {
                self.diagnostic(d);
            }
        }
    }

    /// The progress line of one manifest's result (`cvo apply` without a terminal): the
    /// report's line as text; in JSON an event (`WARN` for a failure, else `INFO`) saying
    /// `ACTION KIND NS/NAME[: ERROR]`, with `action`, `kind`, `namespace`, `name`, `file`,
    /// `line`, `document` and `error` as fields.
    pub fn result(self, release: &crate::release::Release, r: &crate::apply::ManifestResult) {
        if !self.is_json() {
            stderr_line!("{}", crate::sync::report::result_line(release, r));
            return;
        }
        let m = &release.manifests[r.index];
        let (action, kind, name) = (r.action.as_str(), &m.id.kind, &m.id.name);
        let (namespace, error) = (m.id.namespace.as_deref(), r.error.as_deref());
        let file = crate::diagnostic::escaped_path(&m.location.file);
        let (line, document) = (m.location.line, m.location.document);
        let why = error.map(|e| format!(": {e}")).unwrap_or_default();
        macro_rules! event {
            ($level:expr) => {
                tracing::event!(target: TARGET, $level, action, %kind, namespace, %name, %file, line, document, error, "{action} {}{why}", m.id)
            };
        }
        if r.action == crate::apply::Action::Failed {
            event!(tracing::Level::WARN);
        } else {
            event!(tracing::Level::INFO);
        }
    }
}

/// Sets up the process's one subscriber: the logs at `level` (`-v` debug, `-vv` trace,
/// `CVO_LOG` a tracing filter in place of both) and, in JSON mode, the [`Console`]'s events
/// whatever the filter says, and the panic hook ([`json_panic_hook`]).
pub(super) fn init(global: &GlobalArgs, format: LogFormat, level: &str) {
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::filter::{FilterExt as _, filter_fn};
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    // kube's client logs every failed request, each retry included, at ERROR: the commands
    // report failures themselves (one line each), so its lines are shown from -v on.
    let default = match global.verbose {
        0 => format!("{level},kube_client=off"),
        1 => "debug".to_owned(),
        _ => "trace".to_owned(),
    };
    let logs = tracing_subscriber::EnvFilter::try_from_env("CVO_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let filter = filter_fn(|m| m.target() == TARGET).or(logs);
    let layer = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let layer = match format {
        LogFormat::Text => layer.with_ansi(colour_on_stderr()).boxed(),
        LogFormat::Json => layer.json().boxed(),
    };
    let set = tracing_subscriber::registry()
        .with(layer.with_filter(filter))
        .try_init();
    if set.is_ok() && format == LogFormat::Json {
        json_panic_hook();
    }
}

/// Colour only for a person at a terminal, and not when `NO_COLOR` is set (no-color.org).
fn colour_on_stderr() -> bool {
    use std::io::IsTerminal as _;
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// In JSON mode a panic is one `ERROR` event (Rust's own hook writes text): the panic's
/// message, and as fields its `location` (`file:line:column`), the `thread`, and the
/// `backtrace` when `RUST_BACKTRACE` asks for one. The process still ends as a panic does
/// (exit code 101 from the main thread).
fn json_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("(a panic without a message)");
        let location = info.location().map(ToString::to_string);
        let thread = std::thread::current();
        let thread = thread.name().unwrap_or("(unnamed)");
        let backtrace = std::backtrace::Backtrace::capture();
        let backtrace = (backtrace.status() == std::backtrace::BacktraceStatus::Captured)
            .then(|| backtrace.to_string());
        tracing::event!(
            target: TARGET,
            tracing::Level::ERROR,
            location,
            thread,
            backtrace,
            "panicked: {message} (a bug in cvo: please report it)"
        );
    }));
}
