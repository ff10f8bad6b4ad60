//! Data problems, each reported as `path: json-location: message`, the path as
//! [`crate::fsutil::shown`] names it (relative to the current directory when under it).

use std::fmt;
use std::path::{Path, PathBuf};

/// One problem found in the data, located by file and JSON location.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Problem {
    /// The file (or folder) the problem is in.
    pub path: PathBuf,
    /// Where in the file: a JSON path such as `$.flavors[0].flavor.url`, or `line 3, column 7`.
    pub(crate) location: String,
    /// What is wrong and, where it helps, what to do.
    pub message: String,
}

impl Problem {
    /// A problem at `location` in `path`.
    pub(crate) fn new(path: &Path, location: impl Into<String>, message: impl Into<String>) -> Problem {
        Problem { path: path.to_path_buf(), location: location.into(), message: message.into() }
    }

    /// A problem with the whole file (JSON location `$`).
    pub(crate) fn whole(path: &Path, message: impl Into<String>) -> Problem {
        Problem::new(path, "$", message)
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}: {}", crate::fsutil::shown(&self.path), self.location, self.message)
    }
}

/// The error of a run that found problems in the data: every problem, then a count.
#[derive(Debug)]
pub struct Problems {
    /// Every problem, sorted.
    pub list: Vec<Problem>,
    /// True when the problems stopped the run before references between records were checked
    /// (they need every record read), so that more problems may follow once these are fixed.
    pub(crate) references_unchecked: bool,
}

impl Problems {
    /// Problems found with every check done.
    pub(crate) fn all(list: Vec<Problem>) -> Problems {
        Problems { list, references_unchecked: false }
    }

    /// Problems found while reading the data, before references could be checked.
    pub(crate) fn before_references(list: Vec<Problem>) -> Problems {
        Problems { list, references_unchecked: true }
    }
}

impl fmt::Display for Problems {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for problem in &self.list {
            writeln!(f, "{problem}")?;
        }
        let n = self.list.len();
        write!(f, "{n} problem{} found in the data", if n == 1 { "" } else { "s" })?;
        if self.references_unchecked {
            write!(f, " (references between records are checked once these are fixed: more may follow)")?;
        }
        Ok(())
    }
}

impl std::error::Error for Problems {}

/// One step of a JSON location.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Step<'a> {
    /// An object's member.
    Key(&'a str),
    /// An array's item.
    Index(usize),
}

/// Formats a JSON location as a JSONPath: `$`, `$.flavors[0].flavor`, `$["odd key"]`.
pub(crate) fn json_path(steps: &[Step<'_>]) -> String {
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

/// The candidate closest to `word` when it is close enough to be a likely typo (an edit
/// distance of at most a third of its length, and at least 1), for "did you mean" hints.
pub(crate) fn closest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let most = (word.chars().count() / 3).max(1);
    candidates.into_iter().map(|c| (edit_distance(word, c), c)).filter(|(d, _)| *d <= most).min().map(|(_, c)| c)
}

/// Levenshtein distance, counting a swap of two neighbours as one edit (`friut` → `fruit`).
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut rows = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in rows.iter_mut().enumerate() {
        row[0] = i;
    }
    rows[0] = (0..=b.len()).collect();
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut d = (rows[i - 1][j] + 1).min(rows[i][j - 1] + 1).min(rows[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d = d.min(rows[i - 2][j - 2] + 1);
            }
            rows[i][j] = d;
        }
    }
    rows[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typos_find_their_word() {
        let words = ["fruit", "berry", "berry-firmness", "base_url", "page_sizes"];
        assert_eq!(closest("friut", words), Some("fruit"));
        assert_eq!(closest("bery", words), Some("berry"));
        assert_eq!(closest("berry-firmnes", words), Some("berry-firmness"));
        assert_eq!(closest("base-url", words), Some("base_url"));
        assert_eq!(closest("pagesizes", words), Some("page_sizes"));
        assert_eq!(closest("region", words), None);
        assert_eq!(closest("x", words), None);
    }
}
