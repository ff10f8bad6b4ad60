//! Dates without a date crate: the two formats the tree and the server write, and the dates
//! git gives committed data.

use std::collections::BTreeMap;

/// The civil date (year, month 1-12, day 1-31) of a day counted from 1970-01-01 (Howard
/// Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

/// The build date `SOURCE_DATE_EPOCH` asks for, in seconds since the epoch: `None` when it is
/// unset, an error naming it and what to do when it is not a whole number.
pub fn source_date_epoch() -> anyhow::Result<Option<i64>> {
    parse_source_date_epoch(std::env::var("SOURCE_DATE_EPOCH").ok().as_deref())
}

/// [`source_date_epoch`] of the variable's value (`None`: unset).
fn parse_source_date_epoch(value: Option<&str>) -> anyhow::Result<Option<i64>> {
    use anyhow::Context as _;
    let Some(text) = value else { return Ok(None) };
    let seconds = text.trim().parse::<i64>().with_context(|| {
        format!("SOURCE_DATE_EPOCH={text:?} is not a number of seconds since 1970: unset it or fix it")
    })?;
    Ok(Some(seconds))
}

/// The dates git gives a data folder's files: what a build without `SOURCE_DATE_EPOCH` is
/// dated with, so that two fresh clones of the same commit build the same bytes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CommitDates {
    /// The time of the last commit that touched the data folder, in seconds since the epoch:
    /// the tree's `deploy_date`.
    pub data: i64,
    /// The time of the last commit that touched each resource asked for (its folder
    /// `<segment>/`, its tables `<segment>.ndjson` and `<segment>.<name>.ndjson`) or `gen.json`
    /// (which every document depends on), whichever is later: the date of its bulk-data file. A
    /// resource no commit touched is left out.
    pub resources: BTreeMap<String, i64>,
}

/// The [`CommitDates`] of the data folder `data` and of each resource of `segments` in it.
/// `None`, and the build's clock is used, when git is not installed, `data` is not in a git work
/// tree, no commit touched it, or it holds a change git has not committed (a modified, staged,
/// deleted or untracked file under it: the data is newer than any commit; a file git ignores
/// counts, as the build reads it). One `git status` and one `git log --name-only` pass, newest
/// first, stopped once the data, every resource and `gen.json` are dated.
pub fn commit_dates(data: &std::path::Path, segments: &[&str]) -> Option<CommitDates> {
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
    path.rsplit('/').next().is_some_and(crate::data::data_path::is_ignored)
}

/// The current time in seconds since the Unix epoch.
pub(crate) fn now_epoch() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

/// Seconds since the Unix epoch as an RFC 3339 UTC date: `2026-08-06T08:15:22Z`.
pub(crate) fn rfc3339(epoch: i64) -> String {
    let (year, month, day) = civil_from_days(epoch.div_euclid(86_400));
    let secs = epoch.rem_euclid(86_400);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", secs / 3600, secs / 60 % 60, secs % 60)
}

/// Seconds since the Unix epoch as an HTTP date (RFC 9110 IMF-fixdate):
/// `Sun, 06 Nov 1994 08:49:37 GMT`.
pub(crate) fn http_date(secs: u64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let days = secs / 86_400;
    let rest = secs % 86_400;
    let (year, month, day) = civil_from_days(days as i64);
    format!(
        "{}, {day:02} {} {year:04} {:02}:{:02}:{:02} GMT",
        DAYS[(days % 7) as usize],
        MONTHS[(month - 1) as usize],
        rest / 3600,
        rest / 60 % 60,
        rest % 60
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn source_date_epoch_is_a_whole_number_or_an_error() {
        let parse = super::parse_source_date_epoch;
        assert_eq!(parse(None).unwrap(), None);
        assert_eq!(parse(Some(" 1700000000\n")).unwrap(), Some(1_700_000_000));
        assert_eq!(parse(Some("-5")).unwrap(), Some(-5));
        for bad in ["", "yesterday", "1.5"] {
            let error = parse(Some(bad)).unwrap_err().to_string();
            assert!(error.starts_with(&format!("SOURCE_DATE_EPOCH={bad:?} is not a number")), "{error}");
        }
    }

    #[test]
    fn rfc3339() {
        assert_eq!(super::rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(super::rfc3339(1_786_004_122), "2026-08-06T08:15:22Z");
        assert_eq!(super::rfc3339(951_782_400), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn http_date() {
        assert_eq!(super::http_date(0), "Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(super::http_date(784_111_777), "Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(super::http_date(951_782_400), "Tue, 29 Feb 2000 00:00:00 GMT");
    }
}
