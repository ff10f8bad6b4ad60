//! Data problems, each reported as `path: json-location: message`.

use std::fmt;
use std::path::{Path, PathBuf};

/// One problem found in the data, located by file and JSON location.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Problem {
    /// The file (or folder) the problem is in.
    pub path: PathBuf,
    /// Where in the file: a JSON path such as `$.flavors[0].flavor.url`, or `line 3, column 7`.
    pub location: String,
    /// What is wrong and, where it helps, what to do.
    pub message: String,
}

impl Problem {
    /// A problem at `location` in `path`.
    pub fn new(path: &Path, location: impl Into<String>, message: impl Into<String>) -> Problem {
        Problem { path: path.to_path_buf(), location: location.into(), message: message.into() }
    }

    /// A problem with the whole file (JSON location `$`).
    pub fn whole(path: &Path, message: impl Into<String>) -> Problem {
        Problem::new(path, "$", message)
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}: {}", self.path.display(), self.location, self.message)
    }
}

/// The error of a run that found problems in the data: every problem, then a count.
#[derive(Debug)]
pub struct Problems(pub Vec<Problem>);

impl fmt::Display for Problems {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for problem in &self.0 {
            writeln!(f, "{problem}")?;
        }
        let n = self.0.len();
        write!(f, "{n} problem{} found in the data", if n == 1 { "" } else { "s" })
    }
}

impl std::error::Error for Problems {}

/// One step of a JSON location.
#[derive(Debug, Clone, Copy)]
pub enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

/// Formats a JSON location as a JSONPath: `$`, `$.flavors[0].flavor`, `$["odd key"]`.
pub fn json_path(steps: &[Step<'_>]) -> String {
    let mut out = String::from("$");
    for step in steps {
        match step {
            Step::Index(i) => out.push_str(&format!("[{i}]")),
            Step::Key(k) if !k.is_empty() && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') => {
                out.push('.');
                out.push_str(k);
            }
            Step::Key(k) => out.push_str(&format!("[{}]", serde_json::to_string(k).unwrap_or_default())),
        }
    }
    out
}
