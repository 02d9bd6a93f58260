//! `--carbon-intensity-file`: a CSV of timestamped grid intensities, as Electricity Maps exports
//! them (`Datetime (UTC)`, `Carbon Intensity gCO₂eq/kWh (LCA)`, ...) or any CSV with a time
//! column and an intensity column. Times are `2026-11-27 13:00:00` (UTC), RFC 3339 (`Z` or
//! any offset), or Unix seconds, read with `jiff`. The intensity at an instant is interpolated
//! linearly between the two points around it, and held at the first or last point outside the
//! file's range.

use std::fmt;

use thiserror::Error;

/// The most points a file may hold (a year of 5-minute data is 105,120).
const MAX_POINTS: usize = 1_000_000;
/// Above any grid's intensity (coal is about 1,000 g/kWh): a larger value is a unit mistake.
const MAX_G_PER_KWH: f64 = 5_000.0;

#[derive(Debug, Error, PartialEq)]
pub enum ParseError {
    #[error("no header line: the first line must name a time column (e.g. `Datetime (UTC)`) and an intensity column (e.g. `Carbon Intensity gCO₂eq/kWh (LCA)`)")]
    Empty,
    #[error("no {what} column in the header {header:?}: name one {expected}")]
    MissingColumn { what: &'static str, header: String, expected: &'static str },
    #[error("line {line}: {reason}")]
    Line { line: usize, reason: String },
    #[error("no data line: the file needs at least one time and intensity")]
    NoPoints,
    #[error("more than {MAX_POINTS} lines of data")]
    TooLong,
}

/// Intensity points in time order, with no two at the same instant.
#[derive(Debug, Clone, PartialEq)]
pub struct IntensityTimeline {
    /// `(epoch_ms, g_per_kwh)`.
    points: Vec<(i64, f64)>,
}

impl IntensityTimeline {
    pub fn parse(text: &str) -> Result<Self, ParseError> {
        let mut lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty());
        let (_, header) = lines.next().ok_or(ParseError::Empty)?;
        let names: Vec<String> = split(header).map(|h| h.to_ascii_lowercase()).collect();
        let time_col = ["datetime (utc)", "datetime", "timestamp", "time"]
            .iter()
            .find_map(|want| names.iter().position(|n| n == want))
            .ok_or_else(|| ParseError::MissingColumn {
                what: "time",
                header: header.to_owned(),
                expected: "`Datetime (UTC)`, `datetime`, `timestamp` or `time`",
            })?;
        // Electricity Maps gives a direct and a life-cycle (LCA) figure: LCA is what it shows by default.
        let intensity_col = names
            .iter()
            .position(|n| n.contains("carbon intensity") && n.contains("lca"))
            .or_else(|| names.iter().position(|n| n.contains("carbon intensity") || n.contains("carbon_intensity")))
            .or_else(|| names.iter().position(|n| n == "intensity" || n == "g_per_kwh"))
            .ok_or_else(|| ParseError::MissingColumn {
                what: "intensity",
                header: header.to_owned(),
                expected: "`Carbon Intensity gCO₂eq/kWh (LCA)`, `carbon_intensity`, `intensity` or `g_per_kwh`",
            })?;
        let mut points = Vec::new();
        for (n, line) in lines {
            if points.len() == MAX_POINTS {
                return Err(ParseError::TooLong);
            }
            let fields: Vec<&str> = split(line).collect();
            let bad = |reason: String| ParseError::Line { line: n + 1, reason };
            let field = |col: usize| fields.get(col).copied().ok_or_else(|| bad(format!("no column {}", col + 1)));
            let time = field(time_col)?;
            let epoch_ms = parse_utc_ms(time).ok_or_else(|| {
                bad(format!("{time:?} is not a UTC time (2026-11-27 13:00:00, 2026-11-27T13:00:00Z or Unix seconds)"))
            })?;
            let value = field(intensity_col)?;
            let g_per_kwh =
                value.parse::<f64>().ok().filter(|g| g.is_finite() && (0.0..=MAX_G_PER_KWH).contains(g)).ok_or_else(
                    || bad(format!("{value:?} is not an intensity between 0 and {MAX_G_PER_KWH} gCO2e/kWh")),
                )?;
            points.push((epoch_ms, g_per_kwh));
        }
        if points.is_empty() {
            return Err(ParseError::NoPoints);
        }
        points.sort_by_key(|&(t, _)| t);
        if let Some(w) = points.windows(2).find(|w| w[0].0 == w[1].0) {
            return Err(ParseError::Line { line: 0, reason: format!("two intensities at {}", utc(w[0].0)) });
        }
        Ok(Self { points })
    }

    /// Intensity at `epoch_ms`, g/kWh.
    pub fn at(&self, epoch_ms: u64) -> f64 {
        let t = i64::try_from(epoch_ms).unwrap_or(i64::MAX);
        let after = self.points.partition_point(|&(pt, _)| pt <= t);
        match (after.checked_sub(1).map(|i| self.points[i]), self.points.get(after)) {
            (Some((t0, g0)), Some(&(t1, g1))) => g0 + (g1 - g0) * (t - t0) as f64 / (t1 - t0) as f64,
            (Some((_, g)), None) | (None, Some(&(_, g))) => g,
            (None, None) => unreachable!("a timeline has at least one point"),
        }
    }
}

impl fmt::Display for IntensityTimeline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (first, last) = (self.points[0].0, self.points[self.points.len() - 1].0);
        write!(f, "{} points, {} to {}", self.points.len(), utc(first), utc(last))
    }
}

/// Fields of a CSV line; quotes around a field are dropped (no field of ours holds a comma).
fn split(line: &str) -> impl Iterator<Item = &str> {
    line.split(',').map(|f| f.trim().trim_matches('"').trim())
}

/// `2026-11-27 13:00:00` (read as UTC), RFC 3339 (`2026-11-27T13:00:00Z`, fractions and any
/// offset allowed), or Unix seconds.
fn parse_utc_ms(text: &str) -> Option<i64> {
    if let Ok(secs) = text.parse::<i64>() {
        return secs.checked_mul(1000);
    }
    let at = text.parse::<jiff::Timestamp>().ok().or_else(|| {
        let civil: jiff::civil::DateTime = text.parse().ok()?;
        civil.to_zoned(jiff::tz::TimeZone::UTC).ok().map(|z| z.timestamp())
    })?;
    Some(at.as_millisecond())
}

/// `2026-11-27T13:00:00Z` of an epoch in ms (for messages and the description).
fn utc(epoch_ms: i64) -> String {
    match jiff::Timestamp::from_millisecond(epoch_ms) {
        Ok(at) => at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
        Err(_) => format!("{epoch_ms} ms since the epoch"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The columns of an Electricity Maps hourly export.
    const ELECTRICITY_MAPS: &str = "\
Datetime (UTC),Country,Zone Name,Zone Id,Carbon Intensity gCO₂eq/kWh (direct),Carbon Intensity gCO₂eq/kWh (LCA),Low Carbon Percentage,Renewable Percentage,Data Source,Data Estimated,Data Estimation Method
2026-11-27 12:00:00,France,France,FR,20.1,40,90.2,30.1,entsoe.eu,false,
2026-11-27 13:00:00,France,France,FR,60.5,100,85.0,28.3,entsoe.eu,false,
";

    fn ms(text: &str) -> u64 {
        parse_utc_ms(text).unwrap() as u64
    }

    #[test]
    fn electricity_maps_export_uses_the_lca_column_and_interpolates() {
        let timeline = IntensityTimeline::parse(ELECTRICITY_MAPS).unwrap();
        assert_eq!(timeline.at(ms("2026-11-27T12:00:00Z")), 40.0);
        assert_eq!(timeline.at(ms("2026-11-27T12:30:00Z")), 70.0);
        assert_eq!(timeline.at(ms("2026-11-27T12:45:00Z")), 85.0);
        // Held at the ends.
        assert_eq!(timeline.at(ms("2026-11-27T08:00:00Z")), 40.0);
        assert_eq!(timeline.at(ms("2026-11-28T08:00:00Z")), 100.0);
        assert_eq!(timeline.to_string(), "2 points, 2026-11-27T12:00:00Z to 2026-11-27T13:00:00Z");
    }

    #[test]
    fn times_in_every_accepted_form_agree() {
        let expect = 1_795_770_000_000; // 2026-11-27T09:00:00Z (Python datetime agrees)
        for text in ["2026-11-27 09:00:00", "2026-11-27T09:00:00Z", "2026-11-27T09:00:00.000+00:00", "1795770000"] {
            assert_eq!(parse_utc_ms(text), Some(expect), "{text}");
        }
        assert_eq!(utc(expect), "2026-11-27T09:00:00Z");
        assert_eq!(parse_utc_ms("1970-01-01 00:00:00"), Some(0));
        // An RFC 3339 offset says which instant it is: 09:00 at +02:00 is 07:00 UTC.
        assert_eq!(parse_utc_ms("2026-11-27T09:00:00+02:00"), Some(expect - 2 * 3_600_000));
        for bad in ["2026-13-01 00:00:00", "yesterday", "2026-11-27T25:00:00Z", ""] {
            assert_eq!(parse_utc_ms(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_plain_csv_with_unix_seconds_works_out_of_order() {
        let timeline = IntensityTimeline::parse("timestamp,intensity\n200,300\n100,100\n").unwrap();
        assert_eq!(timeline.at(150_000), 200.0);
    }

    #[test]
    fn mistakes_name_the_line_or_the_column() {
        let err = |text: &str| IntensityTimeline::parse(text).unwrap_err().to_string();
        assert!(err("").contains("no header"));
        assert!(err("when,intensity\n").contains("no time column"));
        assert!(err("time,price\n").contains("no intensity column"));
        assert!(err("time,intensity\n").contains("no data line"));
        assert!(err("time,intensity\n100,50\nnoon,60\n").contains("line 3"));
        assert!(err("time,intensity\n100,-5\n").contains("between 0 and"));
        assert!(err("time,intensity\n100,NaN\n").contains("line 2"));
        assert!(err("time,intensity\n100,1\n100,2\n").contains("two intensities"));
    }
}
