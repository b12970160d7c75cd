//! Progress on standard error, only when it is a terminal (never in CI logs or pipes).

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

pub struct Progress {
    what: &'static str,
    on: bool,
    last: Option<Instant>,
    shown: bool,
}

impl Progress {
    pub fn new(what: &'static str) -> Progress {
        Progress {
            what,
            on: std::io::stderr().is_terminal(),
            last: None,
            shown: false,
        }
    }

    /// Reports `done` of `total`, at most ten times a second.
    pub fn update(&mut self, done: usize, total: usize) {
        if !self.on {
            return;
        }
        let now = Instant::now();
        let start = *self.last.get_or_insert(now);
        if done < total && now.duration_since(start) < Duration::from_millis(100) {
            return;
        }
        self.last = Some(now);
        self.shown = true;
        let _ = write!(
            std::io::stderr(),
            "\r\x1b[2K{} {done}/{total} objects",
            self.what
        );
    }

    /// Clears the line.
    pub fn finish(&mut self) {
        if self.shown {
            let _ = write!(std::io::stderr(), "\r\x1b[2K");
            self.shown = false;
        }
    }
}
