//! Progress on stderr for long commands (`export`, `import`, `cache
//! verify`): a bar (or a spinner when the total is unknown) drawn with
//! `indicatif` only when stderr is a terminal, so logs and pipes get only
//! the one-line summary every command prints at the end ([`Progress::finish`]).

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::time::Duration;

/// What a bar counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Items, named (`exchanges`, `bodies`).
    Items(&'static str),
    /// Bytes (shown as KiB, MiB, ...).
    Bytes,
}

/// A progress display on stderr: drawn on a terminal, silent otherwise.
pub struct Progress {
    bar: ProgressBar,
}

impl Progress {
    /// A bar labelled `label` counting `unit` up to `total` (a spinner
    /// when `None`), drawn only when stderr is a terminal.
    pub fn new(label: &str, total: Option<u64>, unit: Unit) -> Progress {
        Progress::with_target(label, total, unit, std::io::stderr().is_terminal())
    }

    /// [`Progress::new`], drawn or not as `draw` says.
    pub fn with_target(label: &str, total: Option<u64>, unit: Unit, draw: bool) -> Progress {
        let bar = match total {
            Some(n) => ProgressBar::with_draw_target(Some(n), target(draw)),
            None => ProgressBar::with_draw_target(None, target(draw)),
        };
        let counts = match (unit, total.is_some()) {
            (Unit::Bytes, true) => "{bytes}/{total_bytes} ({bytes_per_sec}, {eta})".to_string(),
            (Unit::Bytes, false) => "{bytes} ({bytes_per_sec})".to_string(),
            (Unit::Items(name), true) => format!("{{human_pos}}/{{human_len}} {name} ({{eta}})"),
            (Unit::Items(name), false) => format!("{{human_pos}} {name}"),
        };
        let template = match total {
            Some(_) => format!("{{prefix}} [{{bar:30}}] {counts} {{wide_msg}}"),
            None => format!("{{prefix}} {{spinner}} {counts} {{wide_msg}}"),
        };
        if let Ok(style) = ProgressStyle::with_template(&template) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_prefix(label.to_string());
        if draw {
            bar.enable_steady_tick(Duration::from_millis(200));
        }
        Progress { bar }
    }

    /// Sets the position (items or bytes done).
    pub fn set(&self, pos: u64) {
        self.bar.set_position(pos);
    }

    /// Adds `n` to the position.
    pub fn inc(&self, n: u64) {
        self.bar.inc(n);
    }

    /// Changes the total (when it becomes known).
    pub fn set_total(&self, total: u64) {
        self.bar.set_length(total);
    }

    /// A short message after the counts (the current file, say).
    pub fn message(&self, msg: String) {
        self.bar.set_message(msg);
    }

    /// Prints `line` to stderr above the bar (a problem found on the way).
    pub fn println(&self, line: &str) {
        self.bar.suspend(|| eprintln!("{line}"));
    }

    /// Removes the bar (the caller prints its own summary).
    pub fn clear(self) {
        self.bar.finish_and_clear();
    }

    /// Removes the bar and prints the one-line `summary` to stderr.
    pub fn finish(self, summary: &str) {
        self.bar.finish_and_clear();
        eprintln!("{summary}");
    }
}

fn target(draw: bool) -> ProgressDrawTarget {
    if draw {
        ProgressDrawTarget::stderr_with_hz(5)
    } else {
        ProgressDrawTarget::hidden()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hidden_bar_counts_without_drawing() {
        let p = Progress::with_target("export", Some(10), Unit::Items("exchanges"), false);
        p.inc(3);
        p.set(7);
        assert_eq!(p.bar.position(), 7);
        assert!(p.bar.is_hidden());
        let s = Progress::with_target("import", None, Unit::Bytes, false);
        s.set_total(100);
        assert_eq!(s.bar.length(), Some(100));
    }
}
