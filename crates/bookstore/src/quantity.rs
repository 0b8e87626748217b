//! Kubernetes storage quantities ("2Gi", "500M", "1.5Gi", "1e9") to bytes, for comparing sizes.

/// Bytes of a quantity, rounded up; None when it does not parse or is out of range.
pub fn to_bytes(q: &str) -> Option<u128> {
    let q = q.trim().trim_start_matches('+');
    let (num, mult): (&str, u128) = if let Some((n, e)) = q.split_once(['e', 'E']) {
        let exp: u32 = e.trim_start_matches('+').parse().ok()?;
        (n, 10u128.checked_pow(exp)?)
    } else {
        const SUFFIXES: [(&str, u128); 12] = [
            ("Ki", 1 << 10),
            ("Mi", 1 << 20),
            ("Gi", 1 << 30),
            ("Ti", 1 << 40),
            ("Pi", 1 << 50),
            ("Ei", 1 << 60),
            ("k", 1_000),
            ("M", 1_000_000),
            ("G", 1_000_000_000),
            ("T", 1_000_000_000_000),
            ("P", 1_000_000_000_000_000),
            ("E", 1_000_000_000_000_000_000),
        ];
        SUFFIXES
            .iter()
            .find_map(|(s, m)| q.strip_suffix(s).map(|n| (n, *m)))
            .unwrap_or((q, 1))
    };
    if num.is_empty() {
        return None;
    }
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    if !int.chars().chain(frac.chars()).all(|c| c.is_ascii_digit())
        || (int.is_empty() && frac.is_empty())
    {
        return None;
    }
    let int: u128 = if int.is_empty() { 0 } else { int.parse().ok()? };
    let mut total = int.checked_mul(mult)?;
    if !frac.is_empty() {
        let digits = u32::try_from(frac.len()).ok()?;
        let denom = 10u128.checked_pow(digits)?;
        let f: u128 = frac.parse().ok()?;
        total = total.checked_add(f.checked_mul(mult)?.div_ceil(denom))?;
    }
    Some(total)
}

/// True when `q` is written as Kubernetes parses quantities (any unit, sign allowed), e.g.
/// `100m`, `1.5Gi`, `2e3`: the API server answers a malformed one with a 500, not a 422.
pub fn is_quantity(q: &str) -> bool {
    let q = q.strip_prefix(['+', '-']).unwrap_or(q);
    let digits_end = q
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(q.len());
    let (num, suffix) = q.split_at(digits_end);
    let num_ok = !num.is_empty() && num != "." && num.matches('.').count() <= 1;
    let suffix_ok = matches!(
        suffix,
        "" | "n"
            | "u"
            | "m"
            | "k"
            | "M"
            | "G"
            | "T"
            | "P"
            | "E"
            | "Ki"
            | "Mi"
            | "Gi"
            | "Ti"
            | "Pi"
            | "Ei"
    ) || suffix
        .strip_prefix(['e', 'E'])
        .map(|e| e.strip_prefix(['+', '-']).unwrap_or(e))
        .is_some_and(|e| !e.is_empty() && e.chars().all(|c| c.is_ascii_digit()));
    num_ok && suffix_ok
}

/// A byte count printed the way people write volume sizes.
pub fn human(bytes: u128) -> String {
    for (suffix, m) in [
        ("Ti", 1u128 << 40),
        ("Gi", 1 << 30),
        ("Mi", 1 << 20),
        ("Ki", 1 << 10),
    ] {
        if bytes >= m && bytes.is_multiple_of(m) {
            return format!("{}{suffix}", bytes / m);
        }
    }
    bytes.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_forms_kubernetes_accepts() {
        assert_eq!(to_bytes("2Gi"), Some(2 << 30));
        assert_eq!(to_bytes("1.5Gi"), Some(3 << 29));
        assert_eq!(to_bytes("500M"), Some(500_000_000));
        assert_eq!(to_bytes("1e9"), Some(1_000_000_000));
        assert_eq!(to_bytes("+3Ti"), Some(3 << 40));
        assert_eq!(to_bytes("1024"), Some(1024));
        assert_eq!(to_bytes(".5Ki"), Some(512));
    }

    #[test]
    fn refuses_nonsense() {
        for bad in [
            "",
            "Gi",
            "2GB",
            "-1Gi",
            "1.2.3Gi",
            "1e999",
            "ten",
            "99999999999999999999999999999999999999999Ei",
        ] {
            assert_eq!(to_bytes(bad), None, "{bad}");
        }
    }

    #[test]
    fn recognises_resource_quantities() {
        for ok in ["100m", "1", "0.5", "1.5Gi", "2e3", "64Mi", "-1", "1E+2"] {
            assert!(is_quantity(ok), "{ok}");
        }
        for bad in ["a lot", "", "1GB", "1..2", ".", "1e", "Mi", "1 Gi"] {
            assert!(!is_quantity(bad), "{bad}");
        }
    }

    #[test]
    fn prints_sizes() {
        assert_eq!(human(3 << 30), "3Gi");
        assert_eq!(human(1536 << 20), "1536Mi");
        assert_eq!(human(1000), "1000");
    }
}
