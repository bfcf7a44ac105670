//! Progress bars and spinners for long commands, and the one decision of
//! when to show them: only to a person watching a terminal. Progress goes
//! to stderr, never stdout, and never with `--json`, so piped or
//! machine-read output is exactly what the command prints.
//!
//! Log lines written while a bar is on screen go through [`LogWriter`],
//! which lifts the bar out of the way first.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::Duration;

/// Whether to draw progress: a terminal on stderr and no `--json`.
pub fn wanted(json: bool, stderr_is_terminal: bool) -> bool {
    !json && stderr_is_terminal
}

fn enabled(json: bool) -> bool {
    wanted(json, std::io::stderr().is_terminal())
}

/// The bar on screen, if any, so log lines can step around it.
static ACTIVE: Mutex<Option<ProgressBar>> = Mutex::new(None);

/// A bar or spinner that draws nothing when progress is not wanted, and
/// clears itself when dropped.
#[derive(Debug)]
pub struct Progress(Option<ProgressBar>);

impl Progress {
    /// A bar with `message`, counting to `len` `unit`s.
    pub fn bar(json: bool, message: &str, len: u64, unit: &str) -> Self {
        Self::start(json, || {
            let template = format!(
                "{{spinner}} {{msg}} [{{bar:30}}] {{human_pos}}/{{human_len}} {unit}, {{eta}} left"
            );
            let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
            bar.set_style(
                ProgressStyle::with_template(&template)
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> "),
            );
            bar.set_message(message.to_string());
            bar
        })
    }

    /// A spinner with the time it has been running and `message`, cut to
    /// the terminal's width.
    pub fn spinner(json: bool, message: impl Into<String>) -> Self {
        let message = message.into();
        Self::start(json, move || {
            let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            bar.set_style(
                ProgressStyle::with_template("{spinner} [{elapsed}] {wide_msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            bar.set_message(message);
            bar
        })
    }

    fn start(json: bool, make: impl FnOnce() -> ProgressBar) -> Self {
        if !enabled(json) {
            return Self(None);
        }
        let bar = make();
        bar.enable_steady_tick(Duration::from_millis(120));
        if let Ok(mut active) = ACTIVE.lock() {
            *active = Some(bar.clone());
        }
        Self(Some(bar))
    }

    /// Whether anything is drawn.
    pub fn shown(&self) -> bool {
        self.0.is_some()
    }

    pub fn inc(&self, n: u64) {
        if let Some(bar) = &self.0 {
            bar.inc(n);
        }
    }

    pub fn set_message(&self, message: impl Into<String>) {
        if let Some(bar) = &self.0 {
            bar.set_message(message.into());
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(bar) = self.0.take() {
            bar.finish_and_clear();
            if let Ok(mut active) = ACTIVE.lock() {
                *active = None;
            }
        }
    }
}

/// Stderr for the log subscriber: each write is one formatted event, put
/// above the bar on screen (if any) instead of through it.
#[derive(Debug, Default)]
pub struct LogWriter;

impl std::io::Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let active = ACTIVE.lock().ok().and_then(|a| a.clone());
        match active {
            Some(bar) => bar.suspend(|| std::io::stderr().write(buf)),
            None => std::io::stderr().write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_terminal_without_json_sees_progress() {
        assert!(wanted(false, true));
        assert!(!wanted(true, true));
        assert!(!wanted(false, false));
        assert!(!wanted(true, false));
    }
}
