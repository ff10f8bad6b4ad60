//! The progress display of the long commands, `gen build` and `gen publish`: one indicatif bar
//! on stderr, in one style, drawn only when the command asks for it (the binary decides: on a
//! terminal, never with `-q`). Hidden otherwise, when a step costs one atomic add. Also the
//! build's step timings (`GEN_TIMINGS`, [`StepTimer`]), for the benchmarks.

use indicatif::{ProgressBar, ProgressStyle};

/// A bar counting steps toward a total: `<what> [=====>    ] <done>/<total> <unit><message>`.
#[derive(Debug, Clone)]
pub struct Progress {
    bar: ProgressBar,
}

impl Default for Progress {
    /// A hidden bar (library callers, `gen serve --watch`'s rebuilds).
    fn default() -> Progress {
        Progress { bar: ProgressBar::hidden() }
    }
}

impl Progress {
    /// A bar labelled `what`, counting `unit`, drawn on stderr when `show`.
    pub fn new(show: bool, what: &str, unit: &str) -> Progress {
        if !show {
            return Progress::default();
        }
        let bar = ProgressBar::new(0);
        let template = format!("{what} [{{bar:30}}] {{pos}}/{{len}} {unit}{{msg}}");
        let style = ProgressStyle::with_template(&template).expect("a valid template");
        bar.set_style(style.progress_chars("=> "));
        Progress { bar }
    }

    /// Sets the number of steps.
    pub(crate) fn set_total(&self, total: u64) {
        self.bar.set_length(total);
    }

    /// Counts `n` more steps done.
    pub(crate) fn inc(&self, n: u64) {
        self.bar.inc(n);
    }

    /// Shown after the unit, e.g. `, 12.5 MB`.
    pub(crate) fn set_message(&self, message: String) {
        self.bar.set_message(message);
    }

    /// Removes the bar from the terminal (the command's summary line follows).
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// Prints how long each step of a build took, on stderr, when `GEN_TIMINGS` is set (for
/// benchmarks: BENCHMARKS.md's phase tables).
pub(crate) struct StepTimer {
    last: Option<std::cell::Cell<std::time::Instant>>,
}

impl StepTimer {
    /// Times steps when `GEN_TIMINGS` is set; else does nothing.
    pub(crate) fn from_env() -> StepTimer {
        StepTimer { last: std::env::var_os("GEN_TIMINGS").map(|_| std::cell::Cell::new(std::time::Instant::now())) }
    }

    /// True when steps are timed (`GEN_TIMINGS` is set).
    pub(crate) fn on(&self) -> bool {
        self.last.is_some()
    }

    /// Prints, with `GEN_TIMINGS`, how long since the last step `what` took.
    pub(crate) fn step(&self, what: &str) {
        if let Some(last) = &self.last {
            let now = std::time::Instant::now();
            say!("timing: {:>8.3} s  {what}", (now - last.get()).as_secs_f64());
            last.set(now);
        }
    }
}
