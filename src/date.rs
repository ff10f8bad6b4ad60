//! Dates without a date crate: the two formats the tree and the server write, and the build
//! date `SOURCE_DATE_EPOCH` asks for. The dates git gives committed data are the data folder's
//! (`data/commit_dates.rs`).

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
