//! WAL file names: `TTTTTTTTLLLLLLLLSSSSSSSS` (timeline, log, segment in hex) and the
//! timeline history files `TTTTTTTT.history`. Names order by position in the WAL stream
//! (log, segment), then by timeline.
use std::cmp::Ordering;

/// One WAL segment's name, parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    pub timeline: u32,
    pub log: u32,
    pub seg: u32,
}

impl Segment {
    pub fn parse(name: &str) -> Option<Segment> {
        if name.len() != 24 || !name.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let part = |r: std::ops::Range<usize>| u32::from_str_radix(&name[r], 16).ok();
        Some(Segment {
            timeline: part(0..8)?,
            log: part(8..16)?,
            seg: part(16..24)?,
        })
    }

    /// The position in the WAL stream, whatever the timeline.
    pub fn position(&self) -> u64 {
        (u64::from(self.log) << 32) | u64::from(self.seg)
    }

    pub fn name(&self) -> String {
        format!("{:08X}{:08X}{:08X}", self.timeline, self.log, self.seg)
    }
}

impl PartialOrd for Segment {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Segment {
    fn cmp(&self, other: &Self) -> Ordering {
        self.position()
            .cmp(&other.position())
            .then(self.timeline.cmp(&other.timeline))
    }
}

/// A name PostgreSQL may archive or ask back: a segment, a history file, a `.partial`
/// segment (the end of a timeline at promotion) or a `.backup` label. Anything else (a path,
/// `..`) is refused before it reaches the file system.
pub fn is_archive_name(name: &str) -> bool {
    if Segment::parse(name).is_some() {
        return true;
    }
    if let Some(t) = name.strip_suffix(".history") {
        return t.len() == 8 && t.bytes().all(|b| b.is_ascii_hexdigit());
    }
    if let Some(s) = name.strip_suffix(".partial") {
        return Segment::parse(s).is_some();
    }
    if let Some((s, off)) = name.strip_suffix(".backup").and_then(|n| n.split_once('.')) {
        return Segment::parse(s).is_some()
            && off.len() == 8
            && off.bytes().all(|b| b.is_ascii_hexdigit());
    }
    false
}

/// The newest segment among `names` (others ignored).
pub fn newest<'a>(names: impl IntoIterator<Item = &'a str>) -> Option<Segment> {
    names.into_iter().filter_map(Segment::parse).max()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_order_by_position_then_timeline() {
        let a = Segment::parse("000000010000000000000002").expect("a");
        let b = Segment::parse("0000000100000000000000FF").expect("b");
        let c = Segment::parse("000000010000000100000000").expect("c");
        let d = Segment::parse("000000020000000000000002").expect("d");
        assert!(a < b && b < c, "log before segment, numerically");
        assert!(
            a < d && d < b,
            "the same position on a later timeline comes after"
        );
        assert_eq!(c.name(), "000000010000000100000000");
        assert_eq!(
            newest([
                "000000010000000000000003",
                "00000002.history",
                "000000020000000000000003"
            ]),
            Segment::parse("000000020000000000000003")
        );
    }

    #[test]
    fn only_archive_names_are_accepted() {
        for ok in [
            "000000010000000000000002",
            "00000002.history",
            "000000010000000000000002.partial",
            "000000010000000000000002.00000028.backup",
        ] {
            assert!(is_archive_name(ok), "{ok}");
        }
        for bad in [
            "",
            "../etc/passwd",
            "00000001000000000000000G",
            "0000000100000000000000021",
            "x.history",
            "000000010000000000000002.partial/..",
        ] {
            assert!(!is_archive_name(bad), "{bad}");
        }
    }
}
