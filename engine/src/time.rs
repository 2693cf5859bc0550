//! Wall-clock instants as plain numbers, and their ISO 8601 rendering.
//!
//! The engine never reads a clock: callers pass `now`. This module only
//! converts between Unix milliseconds and the UTC text form the API shows
//! (`2026-11-21T20:45:00.123Z`). It is not a general date library.

use std::fmt;

/// Milliseconds since the Unix epoch, UTC.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct UnixMillis(pub i64);

impl UnixMillis {
    pub const fn from_secs(secs: i64) -> Self {
        UnixMillis(secs * 1000)
    }

    pub fn plus_seconds(self, seconds: u32) -> Self {
        UnixMillis(self.0 + i64::from(seconds) * 1000)
    }

    pub fn plus_millis(self, millis: i64) -> Self {
        UnixMillis(self.0 + millis)
    }

    /// Whole seconds since the epoch, rounded down (for `t=` in signatures).
    pub fn unix_seconds(self) -> i64 {
        self.0.div_euclid(1000)
    }

    /// RFC 3339 / ISO 8601 in UTC with millisecond precision and a `Z` zone.
    pub fn to_rfc3339(self) -> String {
        self.to_string()
    }
}

/// A moment's fields in UTC, computed once for either way of writing them.
struct Fields {
    year: i64,
    month: u32,
    day: u32,
    hour: i64,
    minute: i64,
    second: i64,
    millis: i64,
}

/// A moment's RFC 3339 text, `YYYY-MM-DDTHH:MM:SS.mmmZ`, as 24 ASCII bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rfc3339([u8; 24]);

impl Rfc3339 {
    pub fn as_str(&self) -> &str {
        // Only ASCII digits and separators are ever written into it.
        std::str::from_utf8(&self.0).expect("an RFC 3339 text is ASCII")
    }
}

impl UnixMillis {
    fn fields(self) -> Fields {
        let secs = self.0.div_euclid(1000);
        let sod = secs.rem_euclid(86_400);
        let (year, month, day) = civil_from_days(secs.div_euclid(86_400));
        Fields {
            year,
            month,
            day,
            hour: sod / 3600,
            minute: (sod / 60) % 60,
            second: sod % 60,
            millis: self.0.rem_euclid(1000),
        }
    }

    /// The moment's RFC 3339 text, its digits written straight into an
    /// array, for years 0 to 9999 (`None` outside them; [`fmt::Display`]
    /// then writes the longer form). Why not `write!`: every moment of
    /// every answer went through `core::fmt`'s padded integers, and through
    /// JSON's escaping once per piece (about 4 % of a GET's CPU over a
    /// working set); this is the same text with neither.
    pub fn rfc3339(self) -> Option<Rfc3339> {
        let f = self.fields();
        if !(0..=9999).contains(&f.year) {
            return None;
        }
        let mut out = *b"0000-00-00T00:00:00.000Z";
        put_digits(&mut out[0..4], f.year);
        put_digits(&mut out[5..7], i64::from(f.month));
        put_digits(&mut out[8..10], i64::from(f.day));
        put_digits(&mut out[11..13], f.hour);
        put_digits(&mut out[14..16], f.minute);
        put_digits(&mut out[17..19], f.second);
        put_digits(&mut out[20..23], f.millis);
        Some(Rfc3339(out))
    }

    /// The same text through `write!`: the form of years outside 0 to 9999
    /// (a sign, or a fifth digit).
    fn write_padded(self, out: &mut impl fmt::Write) -> fmt::Result {
        let f = self.fields();
        write!(
            out,
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
            f.year, f.month, f.day, f.hour, f.minute, f.second, f.millis
        )
    }
}

/// Writes `value` (non-negative, fewer digits than `into` holds) as decimal
/// digits filling `into`, zero-padded on the left.
fn put_digits(into: &mut [u8], mut value: i64) {
    for slot in into.iter_mut().rev() {
        // 0..=9 after the remainder, so the cast cannot truncate.
        *slot = b'0' + (value % 10) as u8;
        value /= 10;
    }
}

impl fmt::Display for UnixMillis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.rfc3339() {
            Some(text) => f.write_str(text.as_str()),
            None => self.write_padded(f),
        }
    }
}

/// Midnight UTC of a `YYYY-MM-DD` date (years 1970..=9999), or `None` for
/// anything else, an impossible day included (2026-02-30).
pub fn parse_date(s: &str) -> Option<UnixMillis> {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = s.get(r)?;
        part.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| part.parse().ok())?
    };
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    if y < 1970 || !(1..=12).contains(&m) || d < 1 {
        return None;
    }
    let days = days_from_civil(y, m, d);
    // Round-trip to refuse days past the month's end.
    let (ry, rm, rd) = civil_from_days(days);
    (ry == y && i64::from(rm) == m && i64::from(rd) == d).then_some(UnixMillis(days * 86_400_000))
}

/// The `YYYY-MM-DD` (UTC) of a moment.
pub fn date_of(t: UnixMillis) -> String {
    let (y, m, d) = civil_from_days(t.0.div_euclid(86_400_000));
    format!("{y:04}-{m:02}-{d:02}")
}

/// Proleptic Gregorian (year, month, day) to days since 1970-01-01.
/// Howard Hinnant's `days_from_civil` algorithm.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Days since 1970-01-01 to a proleptic Gregorian (year, month, day).
/// Howard Hinnant's `civil_from_days` algorithm.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The text `write!` gives, the form the digit writer must match.
    fn formatted(at: UnixMillis) -> String {
        let mut text = String::new();
        at.write_padded(&mut text).unwrap();
        text
    }

    #[test]
    fn the_digit_writer_writes_what_write_would() {
        let mut rng = crate::sip::rng::SplitMix64::new(11);
        let year_10000 = parse_date("9999-12-31").unwrap().0 + 86_400_000;
        let year_0 = -62_167_219_200_000;
        let mut moments = vec![0, 1, 999, 1000, 86_399_999, year_10000 - 1, year_0, -1];
        moments.extend((0..20_000).map(|_| (rng.next_u64() % year_10000 as u64) as i64));
        moments.extend((0..2_000).map(|_| -((rng.next_u64() % -year_0 as u64) as i64)));
        for at in moments.into_iter().map(UnixMillis) {
            let text = at.rfc3339().expect("years 0 to 9999");
            assert_eq!(text.as_str(), formatted(at), "{at:?}");
            assert_eq!(at.to_string(), formatted(at));
        }
        // Outside those years, the longer form `write!` gives.
        for at in [year_10000, year_0 - 1, i64::MAX, i64::MIN / 2].map(UnixMillis) {
            assert_eq!(at.rfc3339(), None, "{at:?}");
            assert_eq!(at.to_string(), formatted(at));
        }
        assert_eq!(
            UnixMillis(1_800_000_005_007).to_string(),
            "2027-01-15T08:00:05.007Z"
        );
    }

    #[test]
    fn dates_parse_strictly_and_round_trip() {
        assert_eq!(parse_date("1970-01-01"), Some(UnixMillis(0)));
        let t = parse_date("2026-02-28").unwrap();
        assert_eq!(t.to_rfc3339(), "2026-02-28T00:00:00.000Z");
        assert_eq!(date_of(t.plus_millis(86_399_999)), "2026-02-28");
        assert_eq!(
            parse_date("2024-02-29").map(date_of).as_deref(),
            Some("2024-02-29")
        );
        for bad in [
            "2026-02-29",
            "2026-13-01",
            "2026-1-01",
            "26-01-01",
            "",
            "2026-01-0x",
            "1969-12-31",
        ] {
            assert_eq!(parse_date(bad), None, "{bad}");
        }
    }

    #[test]
    fn renders_epoch_and_known_instants() {
        assert_eq!(UnixMillis(0).to_rfc3339(), "1970-01-01T00:00:00.000Z");
        // 2000-02-29 (leap day) 12:34:56.789 UTC
        assert_eq!(
            UnixMillis(951_827_696_789).to_rfc3339(),
            "2000-02-29T12:34:56.789Z"
        );
        assert_eq!(
            UnixMillis(1_795_000_000_000).to_rfc3339(),
            "2026-11-18T11:06:40.000Z"
        );
    }

    #[test]
    fn before_epoch_rounds_down() {
        assert_eq!(UnixMillis(-1).to_rfc3339(), "1969-12-31T23:59:59.999Z");
        assert_eq!(UnixMillis(-1).unix_seconds(), -1);
    }
}
