//! Kubernetes quantities ("2Gi", "500M", "1.5Gi", "1e9", "1E") to bytes, exactly (shared by
//! the operators that size volumes: the BookStore, the PostgresCluster).
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

/// The spelling the API server stores a quantity in (Go's `Quantity.String()`): "1024Mi"
/// becomes "1Gi", "0.1" becomes "100m", "1000" becomes "1k". A child built with the stored
/// spelling is found in place after a restart without a write (see
/// `bosun_runtime::owned`). None when `q` does not parse or leaves the suffixes' range.
pub fn canonical(q: &str) -> Option<String> {
    let p = parse(q.trim())?;
    if !finer_than_milli(&p) && kept_verbatim(q.trim(), &p) {
        return Some(q.trim().to_string());
    }
    let sign = if p.negative && p.digits != 0 { "-" } else { "" };
    let scale = 10u128.checked_pow(p.scale)?;
    if p.bin > 0 {
        // Binary SI stays binary for whole numbers of at least 1024, else it is decimal.
        let value = p.digits.checked_mul(1u128.checked_shl(p.bin)?)?;
        if value % scale == 0 && value / scale >= 1024 {
            let (mut amount, mut k) = (value / scale, 0usize);
            while k < 6 && amount.is_multiple_of(1024) {
                amount /= 1024;
                k += 1;
            }
            let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][k];
            return Some(format!("{sign}{amount}{suffix}"));
        }
        return decimal(sign, value, -i32::try_from(p.scale).ok()?, false);
    }
    let exponent = p.dec.checked_sub(i32::try_from(p.scale).ok()?)?;
    let exponent_form = !matches!(
        q.trim()
            .trim_start_matches(|c: char| c == '+' || c == '-' || c == '.' || c.is_ascii_digit()),
        "" | "n" | "u" | "m" | "k" | "M" | "G" | "T" | "P" | "E"
    );
    decimal(sign, p.digits, exponent, exponent_form)
}

/// A decimal value with digits below a thousandth: the API server rounds it up to a milli,
/// whatever its spelling.
fn finer_than_milli(p: &Parsed) -> bool {
    if p.bin > 0 || p.digits == 0 {
        return false;
    }
    let (mut m, mut e) = (p.digits, i64::from(p.dec) - i64::from(p.scale));
    while m.is_multiple_of(10) {
        m /= 10;
        e += 1;
    }
    e < -3
}

/// Go's parser keeps the input string when it judges it canonical already (its fast path:
/// an int64 mantissa, no more than nano precision, and for binary units a mantissa not
/// divisible by 8, for decimal ones a scale that is a multiple of 3 with no leading zero and
/// no trailing "000") — a leading "+" included.
fn kept_verbatim(q: &str, p: &Parsed) -> bool {
    let rest = q.trim_start_matches(['+', '-']);
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (num, denom) = rest[..end].split_once('.').unwrap_or((&rest[..end], ""));
    let shifted = format!("{num}{denom}");
    let Ok(value) = shifted.parse::<i64>() else {
        return false;
    };
    let digits = (num.len() + denom.len()) as i64;
    if p.bin > 0 {
        let exponent = i64::from(p.bin);
        let precision = 15 - num.len() as i64 - exponent * 3 / 10 - 1;
        let fits = value.checked_mul(1i64 << p.bin.min(62)).is_some() && p.bin < 63;
        return denom.is_empty() && precision >= 0 && fits && value & 7 != 0;
    }
    let scale = i64::from(p.dec) - denom.len() as i64;
    let fits = 10i64
        .checked_pow(u32::try_from(scale.max(0)).unwrap_or(u32::MAX))
        .and_then(|m| value.checked_mul(m))
        .is_some();
    18 - digits >= 0
        && scale >= -9
        && fits
        && scale % 3 == 0
        && !shifted.ends_with("000")
        && !shifted.starts_with('0')
}

/// `mantissa × 10^exponent` with the exponent a multiple of 3 and no trailing zeros left in
/// the mantissa beyond that, as Go's `AsCanonicalBytes` writes it.
fn decimal(
    sign: &str,
    mut mantissa: u128,
    mut exponent: i32,
    exponent_form: bool,
) -> Option<String> {
    if mantissa == 0 {
        return Some("0".into());
    }
    while mantissa.is_multiple_of(10) {
        mantissa /= 10;
        exponent += 1;
    }
    let r = exponent.rem_euclid(3);
    mantissa = mantissa.checked_mul(10u128.pow(r.unsigned_abs()))?;
    exponent -= r;
    if exponent < -3 {
        // The API server rounds anything finer than a milli up to it (seen on v1.20).
        let d = 10u128.checked_pow((-3 - exponent).unsigned_abs())?;
        return decimal(sign, mantissa.div_ceil(d), -3, exponent_form);
    }
    if exponent_form {
        return Some(if exponent == 0 {
            format!("{sign}{mantissa}")
        } else {
            format!("{sign}{mantissa}e{exponent}")
        });
    }
    let suffix = match exponent {
        -9 => "n",
        -6 => "u",
        -3 => "m",
        0 => "",
        3 => "k",
        6 => "M",
        9 => "G",
        12 => "T",
        15 => "P",
        18 => "E",
        _ => return None,
    };
    Some(format!("{sign}{mantissa}{suffix}"))
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
    fn canonical_spellings() {
        for (q, want) in [
            ("1024Mi", "1Gi"),
            ("0.125Gi", "128Mi"),
            ("1536Mi", "1536Mi"),
            ("1.5Ki", "1536"),
            ("0.5Ki", "512"),
            ("2Gi", "2Gi"),
            ("0.1", "100m"),
            ("1000", "1k"),
            ("1500m", "1500m"),
            ("1.5", "1500m"),
            ("100m", "100m"),
            ("1e3", "1e3"),
            ("1E", "1E"),
            ("2Ei", "2Ei"),
            ("0", "0"),
            ("0Gi", "0"),
            ("64Mi", "64Mi"),
            ("0.3Ki", "307200m"),
            ("1234567e-2", "12345670e-3"),
            ("12e1", "120"),
            ("1e19", "10e18"),
            ("1n", "1m"),
            ("5e-7", "1e-3"),
            ("-1024Mi", "-1Gi"),
            ("-0.1", "-100m"),
            ("+3Ti", "+3Ti"),
            ("+1", "+1"),
            ("01Ki", "01Ki"),
        ] {
            assert_eq!(canonical(q).as_deref(), Some(want), "{q}");
        }
    }

    #[test]
    fn prints_sizes() {
        assert_eq!(human(3 << 30), "3Gi");
        assert_eq!(human(1536 << 20), "1536Mi");
        assert_eq!(human(1000), "1000");
    }
}
