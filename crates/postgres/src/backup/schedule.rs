//! The base-backup schedule: five cron fields (minute, hour, day of month, month, day of
//! week; UTC), each `*`, a number, a range `a-b`, a step `*/n` or `a-b/n`, or a list of
//! those. As in cron, when both day fields are restricted a day matching either runs.
use chrono::{DateTime, Datelike, Duration, Timelike, Utc};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cron {
    minutes: Vec<bool>,
    hours: Vec<bool>,
    days: Vec<bool>,
    months: Vec<bool>,
    weekdays: Vec<bool>,
    days_restricted: bool,
    weekdays_restricted: bool,
}

impl Cron {
    pub fn parse(s: &str) -> Result<Cron, String> {
        let f: Vec<&str> = s.split_whitespace().collect();
        let [mi, h, d, mo, w] = f.as_slice() else {
            return Err(format!("{s:?}: five fields are needed"));
        };
        let mut weekdays = field(w, 0, 7)?;
        // 7 is Sunday too.
        if weekdays[7] {
            weekdays[0] = true;
        }
        Ok(Cron {
            minutes: field(mi, 0, 59)?,
            hours: field(h, 0, 23)?,
            days: field(d, 1, 31)?,
            months: field(mo, 1, 12)?,
            weekdays,
            days_restricted: *d != "*",
            weekdays_restricted: *w != "*",
        })
    }

    fn day_matches(&self, t: &DateTime<Utc>) -> bool {
        let dom = self.days[t.day() as usize];
        let dow = self.weekdays[t.weekday().num_days_from_sunday() as usize];
        match (self.days_restricted, self.weekdays_restricted) {
            (true, true) => dom || dow,
            (true, false) => dom,
            (false, true) => dow,
            (false, false) => true,
        }
    }

    /// The first run strictly after `t` (within five years; None for a date that never
    /// comes, such as 31 February).
    pub fn next_after(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let mut c = (t + Duration::minutes(1))
            .with_second(0)?
            .with_nanosecond(0)?;
        let end = t + Duration::days(5 * 366);
        while c <= end {
            if !self.months[c.month() as usize] || !self.day_matches(&c) {
                c = (c + Duration::days(1)).with_hour(0)?.with_minute(0)?;
                continue;
            }
            if !self.hours[c.hour() as usize] {
                c = (c + Duration::hours(1)).with_minute(0)?;
                continue;
            }
            if self.minutes[c.minute() as usize] {
                return Some(c);
            }
            c += Duration::minutes(1);
        }
        None
    }
}

/// One field as a table of the values it allows, indexed by value.
fn field(s: &str, min: u32, max: u32) -> Result<Vec<bool>, String> {
    let mut out = vec![false; max as usize + 1];
    for part in s.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((r, n)) => (r, n.parse::<u32>().ok().filter(|n| *n > 0)),
            None => (part, Some(1)),
        };
        let step = step.ok_or_else(|| format!("{part:?}: a step must be a positive number"))?;
        let num = |v: &str| {
            v.parse::<u32>()
                .ok()
                .filter(|n| (min..=max).contains(n))
                .ok_or_else(|| format!("{v:?} is not a number in {min}-{max}"))
        };
        let (lo, hi) = match range {
            "*" => (min, max),
            r => match r.split_once('-') {
                Some((a, b)) => (num(a)?, num(b)?),
                None if part.contains('/') => (num(r)?, max),
                None => (num(r)?, num(r)?),
            },
        };
        if lo > hi {
            return Err(format!("{range:?}: the range is backwards"));
        }
        for v in (lo..=hi).step_by(step as usize) {
            out[v as usize] = true;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().expect("time")
    }

    #[test]
    fn the_next_run_is_found() {
        let daily = Cron::parse("0 3 * * *").expect("daily");
        assert_eq!(
            daily.next_after(at("2026-11-25T01:30:00Z")),
            Some(at("2026-11-25T03:00:00Z"))
        );
        assert_eq!(
            daily.next_after(at("2026-11-25T03:00:00Z")),
            Some(at("2026-11-26T03:00:00Z")),
            "strictly after"
        );
        let quarter = Cron::parse("*/15 * * * *").expect("every 15");
        assert_eq!(
            quarter.next_after(at("2026-11-25T01:31:10Z")),
            Some(at("2026-11-25T01:45:00Z"))
        );
        // Sundays at 02:30 (25 Nov 2026 is a Wednesday).
        let sunday = Cron::parse("30 2 * * 0").expect("weekly");
        assert_eq!(
            sunday.next_after(at("2026-11-25T00:00:00Z")),
            Some(at("2026-11-29T02:30:00Z"))
        );
        let list = Cron::parse("0 1-3/2,12 1 1 *").expect("list");
        assert_eq!(
            list.next_after(at("2026-11-25T00:00:00Z")),
            Some(at("2027-01-01T01:00:00Z"))
        );
        assert_eq!(
            Cron::parse("0 0 31 2 *")
                .expect("never")
                .next_after(at("2026-01-01T00:00:00Z")),
            None
        );
    }

    #[test]
    fn bad_fields_are_refused() {
        for bad in [
            "* * * *",
            "60 * * * *",
            "* 24 * * *",
            "*/0 * * * *",
            "5-1 * * * *",
            "x * * * *",
        ] {
            assert!(Cron::parse(bad).is_err(), "{bad}");
        }
    }
}
