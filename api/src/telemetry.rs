//! Logging: tracing to stderr (text or JSON), every line of a request inside its
//! span (request id, method, path, agency, key id), and panics logged through
//! tracing so they carry the request id too. Keys, secrets and passwords are
//! never recorded: spans hold ids, never credentials, and the query string is
//! left out.

use std::io::IsTerminal;

use clap::ValueEnum;
use tracing_subscriber::EnvFilter;

/// Log line format.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// Installs the global subscriber and the panic hook. `default_level` applies
/// when `RUST_LOG` is unset. Calling it twice is harmless.
pub fn init(format: LogFormat, default_level: &str) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    let installed = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .try_init(),
    };
    if installed.is_ok() {
        install_panic_hook();
    }
}

/// Logs panics as tracing errors, inside whatever span is current (for a
/// request: its request id), then hands them to the previous hook (which prints
/// the location and, with `RUST_BACKTRACE`, the backtrace). The request gets a
/// 500 envelope from the panic guard and the process keeps serving. Installing
/// twice is harmless.
pub fn install_panic_hook() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            log_panic(info);
            previous(info);
        }));
    });
}

fn log_panic(info: &std::panic::PanicHookInfo<'_>) {
    {
        let message = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "non-string panic payload".to_owned());
        let location = info
            .location()
            .map(|l| format!("{}:{}", l.file(), l.line()))
            .unwrap_or_default();
        tracing::error!(%message, %location, "panic");
    }
}
