//! Base64 and base32 as Go's `encoding/base64` and `encoding/base32` standard
//! encodings do them, with Go's error texts (`illegal base64 data at input byte 0`),
//! which Sprig returns as the decoded string.
use super::{s, FuncDef};
use crate::func;
use crate::value::Value;

pub const FUNCS: &[FuncDef] = &[
    func!("b64enc", [Str], |_, a| Ok(Value::string(base64_std(
        s(&a[0]).as_bytes()
    )))),
    func!("b64dec", [Str], |_, a| Ok(Value::string(
        match base64_decode(s(&a[0])) {
            Ok(b) => String::from_utf8_lossy(&b).into_owned(),
            Err(e) => e,
        }
    ))),
    func!("b32enc", [Str], |_, a| Ok(Value::string(base32_std(
        s(&a[0]).as_bytes()
    )))),
    func!("b32dec", [Str], |_, a| Ok(Value::string(
        match base32_decode(s(&a[0])) {
            Ok(b) => String::from_utf8_lossy(&b).into_owned(),
            Err(e) => e,
        }
    ))),
];

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const B32: &[u8; 32] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

pub fn base64_std(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(B64[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// `base64.StdEncoding.DecodeString`: padding required, CR and LF ignored.
pub fn base64_decode(s: &str) -> Result<Vec<u8>, String> {
    let err = |i: usize| format!("illegal base64 data at input byte {i}");
    let input: Vec<(usize, u8)> = s
        .bytes()
        .enumerate()
        .filter(|(_, c)| *c != b'\r' && *c != b'\n')
        .collect();
    let mut out = Vec::with_capacity(input.len() / 4 * 3);
    let mut i = 0;
    while i < input.len() {
        let mut vals = [0u32; 4];
        let mut n = 0;
        while n < 4 {
            let Some(&(pos, c)) = input.get(i) else {
                if n == 0 {
                    return Ok(out);
                }
                return Err(err(input
                    .last()
                    .map_or(0, |p| p.0 + 1)
                    .saturating_sub(0)
                    .max(i)));
            };
            if c == b'=' {
                // Padding: only at the end, completing the quantum.
                if n < 2 {
                    return Err(err(pos));
                }
                let need = 4 - n;
                for k in 0..need {
                    match input.get(i + k) {
                        Some(&(_, b'=')) => {}
                        Some(&(p, _)) => return Err(err(p)),
                        None => return Err(err(s.len())),
                    }
                }
                if let Some(&(p, _)) = input.get(i + need) {
                    return Err(err(p));
                }
                let v = vals
                    .iter()
                    .take(n)
                    .enumerate()
                    .fold(0u32, |acc, (k, x)| acc | (x << (18 - 6 * k)));
                out.push((v >> 16) as u8);
                if n == 3 {
                    out.push((v >> 8) as u8);
                }
                return Ok(out);
            }
            let Some(d) = B64.iter().position(|&x| x == c) else {
                return Err(err(pos));
            };
            vals[n] = d as u32;
            n += 1;
            i += 1;
        }
        let v = (vals[0] << 18) | (vals[1] << 12) | (vals[2] << 6) | vals[3];
        out.extend_from_slice(&[(v >> 16) as u8, (v >> 8) as u8, v as u8]);
    }
    Ok(out)
}

pub fn base32_std(data: &[u8]) -> String {
    let mut out = String::new();
    for chunk in data.chunks(5) {
        let mut b = [0u8; 5];
        b[..chunk.len()].copy_from_slice(chunk);
        let n = b.iter().fold(0u64, |acc, &x| (acc << 8) | u64::from(x));
        let chars = match chunk.len() {
            1 => 2,
            2 => 4,
            3 => 5,
            4 => 7,
            _ => 8,
        };
        for i in 0..8 {
            if i < chars {
                out.push(B32[((n >> (35 - 5 * i)) & 31) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

pub fn base32_decode(s: &str) -> Result<Vec<u8>, String> {
    let err = |i: usize| format!("illegal base32 data at input byte {i}");
    let clean: Vec<(usize, u8)> = s
        .bytes()
        .enumerate()
        .filter(|(_, c)| *c != b'\r' && *c != b'\n')
        .collect();
    if !clean.len().is_multiple_of(8) {
        return Err(err(clean.len() / 8 * 8));
    }
    let mut out = Vec::new();
    for block in clean.chunks(8) {
        let mut n: u64 = 0;
        let mut count = 0;
        for &(pos, c) in block {
            if c == b'=' {
                continue;
            }
            let Some(d) = B32.iter().position(|&x| x == c) else {
                return Err(err(pos));
            };
            n = (n << 5) | d as u64;
            count += 1;
        }
        n <<= 5 * (8 - count);
        let bytes = match count {
            8 => 5,
            7 => 4,
            5 => 3,
            4 => 2,
            2 => 1,
            _ => return Err(err(block[0].0)),
        };
        for k in 0..bytes {
            out.push((n >> (32 - 8 * k)) as u8);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip() {
        assert_eq!(base64_std(b"hi"), "aGk=");
        assert_eq!(base64_decode("aGk=").unwrap(), b"hi");
        assert_eq!(
            base64_decode("!!").unwrap_err(),
            "illegal base64 data at input byte 0"
        );
        assert_eq!(base32_std(b"hi"), "NBUQ====");
        assert_eq!(base32_decode("NBUQ====").unwrap(), b"hi");
    }
}
