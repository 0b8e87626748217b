//! Base64 as PyYAML's `!!binary` uses it: `base64.decodebytes` (CPython's non-strict
//! `a2b_base64`, which skips characters outside the alphabet) and `base64.encodebytes`
//! (76-character lines, each ending in a newline).

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// `base64.decodebytes(text.encode('ascii'))`, or the text of the exception.
pub(crate) fn decode_base64(text: &str) -> Result<Vec<u8>, String> {
    if let Some(c) = text.chars().find(|c| !c.is_ascii()) {
        let pos = text.chars().position(|x| x == c).unwrap_or(0);
        return Err(format!(
            "'ascii' codec can't encode character '\\u{:04x}' in position {pos}: ordinal not in range(128)",
            c as u32
        ));
    }
    let mut out = Vec::new();
    let (mut quad_pos, mut left, mut pads) = (0u8, 0u32, 0u8);
    for b in text.bytes() {
        if b == b'=' {
            if quad_pos >= 2 {
                pads += 1;
                if quad_pos + pads >= 4 {
                    return Ok(out);
                }
            }
            continue;
        }
        let Some(v) = ALPHABET.iter().position(|&a| a == b) else {
            continue;
        };
        let v = v as u32;
        match quad_pos {
            0 => {
                quad_pos = 1;
                left = v;
            }
            1 => {
                quad_pos = 2;
                out.push(((left << 2) | (v >> 4)) as u8);
                left = v & 0x0f;
            }
            2 => {
                quad_pos = 3;
                out.push(((left << 4) | (v >> 2)) as u8);
                left = v & 0x03;
            }
            _ => {
                quad_pos = 0;
                out.push(((left << 6) | v) as u8);
                left = 0;
            }
        }
    }
    match quad_pos {
        0 => Ok(out),
        1 => Err(format!(
            "Invalid base64-encoded string: number of data characters ({}) cannot be 1 more than a multiple of 4",
            out.len() / 3 * 4 + 1
        )),
        _ => Err("Incorrect padding".into()),
    }
}

/// `base64.encodebytes(data).decode('ascii')`.
pub(crate) fn encode_base64_lines(data: &[u8]) -> String {
    let mut encoded = String::new();
    for chunk in data.chunks(3) {
        let mut n: u32 = 0;
        for (i, &b) in chunk.iter().enumerate() {
            n |= u32::from(b) << (16 - 8 * i);
        }
        for i in 0..4 {
            if i <= chunk.len() {
                encoded.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                encoded.push('=');
            }
        }
    }
    let mut out = String::new();
    for line in encoded.as_bytes().chunks(76) {
        out.push_str(std::str::from_utf8(line).unwrap_or_default());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_like_cpython() {
        assert_eq!(decode_base64("Zm9v\nYmFy"), Ok(b"foobar".to_vec()));
        assert_eq!(decode_base64("Zm9vYg=="), Ok(b"foob".to_vec()));
        assert_eq!(decode_base64("Zm9vYg= =junk"), Ok(b"foob".to_vec()));
        assert_eq!(decode_base64("Zm9vY"), Err("Invalid base64-encoded string: number of data characters (5) cannot be 1 more than a multiple of 4".into()));
        assert_eq!(decode_base64("Zm9vYg"), Err("Incorrect padding".into()));
        assert_eq!(encode_base64_lines(b"foob"), "Zm9vYg==\n");
        assert_eq!(encode_base64_lines(b""), "");
    }
}
