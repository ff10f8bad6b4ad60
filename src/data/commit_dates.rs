//! The dates git gives a data folder's files (one `git status`, one `git log`): what a build
//! without `SOURCE_DATE_EPOCH` is dated with, so that two fresh clones of the same commit build
//! the same bytes.

use std::collections::BTreeMap;

/// The dates git gives a data folder's files: what a build without `SOURCE_DATE_EPOCH` is
/// dated with, so that two fresh clones of the same commit build the same bytes.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct CommitDates {
    /// The time of the last commit that touched the data folder, in seconds since the epoch:
    /// the tree's `deploy_date`.
    pub(crate) data: i64,
    /// The time of the last commit that touched each resource asked for (its folder
    /// `<segment>/`, its tables `<segment>.ndjson` and `<segment>.<name>.ndjson`) or `gen.json`
    /// (which every document depends on), whichever is later: the date of its bulk-data file. A
    /// resource no commit touched is left out.
    pub(crate) resources: BTreeMap<String, i64>,
}

/// The [`CommitDates`] of the data folder `data` and of each resource of `segments` in it.
/// `None`, and the build's clock is used, when git is not installed, `data` is not in a git work
/// tree, no commit touched it, or it holds a change git has not committed (a modified, staged,
/// deleted or untracked file under it: the data is newer than any commit; a file git ignores
/// counts, as the build reads it). One `git status` and one `git log --name-only` pass, newest
/// first, stopped once the data, every resource and `gen.json` are dated.
pub(crate) fn commit_dates(data: &std::path::Path, segments: &[&str]) -> Option<CommitDates> {
    use std::io::BufRead;
    if !committed(data) {
        return None;
    }
    let mut child = std::process::Command::new("git")
        .arg("-C")
        .arg(data)
        // one entry per path, as the commit has it: a rename is a removal and an addition
        .args(["log", "--no-renames", "--format=%x00%ct", "--name-only", "--relative", "-z", "--", "."])
        .env("GIT_OPTIONAL_LOCKS", "0")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    let wanted: std::collections::BTreeSet<&str> = segments.iter().copied().collect();
    let (mut dates, mut config, mut date, mut newest) = (BTreeMap::new(), None, None::<i64>, None);
    // `\0<time>\0` before each commit's names (the first after a newline), each name ended by `\0`
    let mut tokens = std::io::BufReader::new(child.stdout.take()?).split(0);
    while let Some(Ok(token)) = tokens.next() {
        if token.is_empty() {
            date = tokens.next().and_then(Result::ok).and_then(|t| String::from_utf8(t).ok()?.trim().parse().ok());
            newest = newest.or(date);
            if wanted.is_empty() && newest.is_some() {
                break;
            }
            continue;
        }
        let (Some(date), Ok(path)) = (date, std::str::from_utf8(token.strip_prefix(b"\n").unwrap_or(&token))) else {
            continue;
        };
        if path == crate::config::CONFIG_FILE {
            config.get_or_insert(date);
        } else if let Some(segment) = resource_of(path).filter(|segment| wanted.contains(segment)) {
            dates.entry(segment.to_string()).or_insert(date);
        }
        if config.is_some() && dates.len() == wanted.len() {
            break;
        }
    }
    drop(tokens);
    let _ = child.kill();
    let _ = child.wait();
    let resources = dates.into_iter().map(|(segment, date)| (segment, date.max(config.unwrap_or(date)))).collect();
    Some(CommitDates { data: newest?, resources })
}

/// The resource a data file of `path` (relative to the data folder) belongs to: the folder it
/// is in, or the table it is (`<segment>.ndjson`, `<segment>.<name>.ndjson`).
fn resource_of(path: &str) -> Option<&str> {
    match path.split_once('/') {
        Some((segment, _)) => Some(segment),
        None => path.strip_suffix(".ndjson").map(|table| table.split('.').next().unwrap_or(table)),
    }
}

/// True when the data folder `data` is in a git work tree and holds no change git has not
/// committed (see [`commit_dates`]).
fn committed(data: &std::path::Path) -> bool {
    // ignored files too: a record the repository's .gitignore leaves out is still built
    let status = git(data, &["status", "--porcelain", "--untracked-files=all", "--ignored", "--", "."]);
    status.is_some_and(|status| status.lines().all(names_a_skipped_file))
}

/// The output of `git -C data args`, when git runs and succeeds.
fn git(data: &std::path::Path, args: &[&str]) -> Option<String> {
    let output = std::process::Command::new("git")
        .arg("-C")
        .arg(data)
        .args(args)
        // a status must not write git's index (a refresh would take its lock)
        .env("GIT_OPTIONAL_LOCKS", "0")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    output.status.success().then(|| String::from_utf8_lossy(&output.stdout).into_owned())
}

/// True when a `git status --porcelain` line names a file the data walk skips (an editor's
/// `.1.json.swp`, a backup `1.json~`): a change to it is no change to the data.
fn names_a_skipped_file(line: &str) -> bool {
    let path = line.get(3..).unwrap_or("").trim_matches('"');
    path.rsplit('/').next().is_some_and(super::data_path::is_ignored)
}
