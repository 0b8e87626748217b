//! Base64 as Go's `encoding/base64.StdEncoding` does it, for `!!binary`: decoding ignores
//! line breaks and demands padding; encoding is the standard alphabet with padding.

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn value(c: u8) -> Option<u32> {
    ALPHABET.iter().position(|&a| a == c).map(|p| p as u32)
}

/// `StdEncoding.DecodeString`, or `None` for corrupt input.
pub(crate) fn decode_go_std(s: &str) -> Option<Vec<u8>> {
    let data: Vec<u8> = s.bytes().filter(|&c| c != b'\r' && c != b'\n').collect();
    if !data.len().is_multiple_of(4) {
        return None;
    }
    let mut out = Vec::with_capacity(data.len() / 4 * 3);
    let quanta = data.len() / 4;
    for (q, chunk) in data.chunks(4).enumerate() {
        let pad = chunk.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 || (pad > 0 && q + 1 != quanta) {
            return None;
        }
        let mut n: u32 = 0;
        for &c in &chunk[..4 - pad] {
            n = (n << 6) | value(c)?;
        }
        n <<= 6 * pad as u32;
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&bytes[..3 - pad]);
    }
    Some(out)
}

/// `StdEncoding.EncodeToString`.
pub(crate) fn encode_std(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let mut n: u32 = 0;
        for (i, &b) in chunk.iter().enumerate() {
            n |= u32::from(b) << (16 - 8 * i);
        }
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        for data in [&b""[..], b"f", b"fo", b"foo", b"foob", b"\xff\xfe\x00"] {
            assert_eq!(decode_go_std(&encode_std(data)).as_deref(), Some(data));
        }
        assert_eq!(encode_std(b"foobar"), "Zm9vYmFy");
        assert_eq!(decode_go_std("Zm9v\nYmE="), Some(b"fooba".to_vec()));
        assert_eq!(decode_go_std("Zm9"), None);
        assert_eq!(decode_go_std("Zm9v YmE="), None);
    }
}
