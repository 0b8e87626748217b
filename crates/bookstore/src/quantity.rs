//! Kubernetes quantities ("2Gi", "500M", "1.5Gi", "1e9", "1E") to bytes, exactly.
//!
//! The grammar is Kubernetes' own (`resource.Quantity`):
//! `<signed number><suffix>`, where the suffix is a binary SI unit (`Ki`…`Ei`), a decimal SI
//! unit (`n`, `u`, `m`, none, `k`, `M`, `G`, `T`, `P`, `E`) or a decimal exponent (`e`/`E`
//! followed by a signed integer). An `E` followed by a sign or a digit is an exponent;
//! otherwise it is the exa unit.
//!
//! Not a crate: `kube_quantity` parses the number through an `f64` (inexact past 2^53) and
//! reads a missing number ("Gi") as zero; `k8s_quantity_parser` returns `i64` and does not
//! know the exponent forms. Sizes are compared to the byte here, so the parser is exact:
//! integer arithmetic on u128, fractions rounded up as Kubernetes rounds storage.

/// A parsed quantity: `±digits / 10^scale × 2^bin × 10^dec`.
struct Parsed {
    negative: bool,
    digits: u128,
    scale: u32,
    bin: u32,
    dec: i32,
}

fn parse(q: &str) -> Option<Parsed> {
    let (negative, rest) = match q.as_bytes().first()? {
        b'+' => (false, &q[1..]),
        b'-' => (true, &q[1..]),
        _ => (false, q),
    };
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (num, suffix) = rest.split_at(end);
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    if (int.is_empty() && frac.is_empty()) || frac.contains('.') {
        return None;
    }
    let mut digits: u128 = 0;
    for c in int.bytes().chain(frac.bytes()) {
        digits = digits.checked_mul(10)?.checked_add(u128::from(c - b'0'))?;
    }
    let scale = u32::try_from(frac.len()).ok()?;
    let (bin, dec) = match suffix {
        "" => (0, 0),
        "Ki" => (10, 0),
        "Mi" => (20, 0),
        "Gi" => (30, 0),
        "Ti" => (40, 0),
        "Pi" => (50, 0),
        "Ei" => (60, 0),
        "n" => (0, -9),
        "u" => (0, -6),
        "m" => (0, -3),
        "k" => (0, 3),
        "M" => (0, 6),
        "G" => (0, 9),
        "T" => (0, 12),
        "P" => (0, 15),
        "E" => (0, 18),
        exp => {
            let e = exp.strip_prefix(['e', 'E'])?;
            let digits_part = e.strip_prefix(['+', '-']).unwrap_or(e);
            if digits_part.is_empty() || !digits_part.bytes().all(|c| c.is_ascii_digit()) {
                return None;
            }
            (0, e.parse::<i32>().ok()?)
        }
    };
    Some(Parsed {
        negative,
        digits,
        scale,
        bin,
        dec,
    })
}

/// Bytes of a quantity, rounded up; None when it does not parse, is negative or is out of
/// range.
pub fn to_bytes(q: &str) -> Option<u128> {
    let p = parse(q.trim())?;
    if p.negative && p.digits != 0 {
        return None;
    }
    let mut num = p.digits.checked_mul(1u128.checked_shl(p.bin)?)?;
    let mut den = 10u128.checked_pow(p.scale)?;
    if p.dec >= 0 {
        num = num.checked_mul(10u128.checked_pow(p.dec.unsigned_abs())?)?;
    } else {
        den = den.checked_mul(10u128.checked_pow(p.dec.unsigned_abs())?)?;
    }
    Some(num.div_ceil(den))
}

/// True when `q` is written as Kubernetes parses quantities (any unit, sign allowed), e.g.
/// `100m`, `1.5Gi`, `2e3`: the API server answers a malformed one with a 500, not a 422.
pub fn is_quantity(q: &str) -> bool {
    parse(q).is_some()
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
        // The exa suffixes, and the exponent forms beside them.
        assert_eq!(to_bytes("1E"), Some(1_000_000_000_000_000_000));
        assert_eq!(to_bytes("2Ei"), Some(2 << 60));
        assert_eq!(to_bytes("1E3"), Some(1000));
        assert_eq!(to_bytes("1e+3"), Some(1000));
        assert_eq!(to_bytes("1500m"), Some(2));
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
