//! Hashes, random strings and UUIDs. Hashes are deterministic and match Go; the
//! random functions draw from the operating system's generator, as Sprig's
//! `crypto/rand` does, so their output can never be compared with Helm's.
use sha1::Digest;

use super::{check_len, int, s, FnResult, FuncDef};
use crate::func;
use crate::template::exec::Exec;
use crate::value::Value;

pub const FUNCS: &[FuncDef] = &[
    func!("sha1sum", [Str], |_, a| Ok(Value::string(hex(
        &sha1::Sha1::digest(s(&a[0]).as_bytes())
    )))),
    func!("sha256sum", [Str], |_, a| Ok(Value::string(hex(
        &sha2::Sha256::digest(s(&a[0]).as_bytes())
    )))),
    func!("sha512sum", [Str], |_, a| Ok(Value::string(hex(
        &sha2::Sha512::digest(s(&a[0]).as_bytes())
    )))),
    func!("adler32sum", [Str], |_, a| Ok(Value::string(
        adler32(s(&a[0]).as_bytes()).to_string()
    ))),
    func!("randAlphaNum", [Int], |ex, a| rand_from(
        ex,
        int(&a[0]),
        b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
    )),
    func!("randAlpha", [Int], |ex, a| rand_from(
        ex,
        int(&a[0]),
        b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
    )),
    func!("randNumeric", [Int], |ex, a| rand_from(
        ex,
        int(&a[0]),
        b"0123456789"
    )),
    func!("randAscii", [Int], |ex, a| {
        let printable: Vec<u8> = (32u8..127).collect();
        rand_from(ex, int(&a[0]), &printable)
    }),
    func!("randBytes", [Int], |ex, a| {
        let n = int(&a[0]).max(0) as usize;
        check_len(ex, n * 2)?;
        let bytes: Vec<u8> = (0..n).map(|_| rand::random::<u8>()).collect();
        Ok(Value::string(super::encoding::base64_std(&bytes)))
    }),
    func!("uuidv4", [], |_, _| Ok(Value::string(uuid_v4()))),
    func!("shuffle", [Str], |_, a| {
        let mut chars: Vec<char> = s(&a[0]).chars().collect();
        for i in (1..chars.len()).rev() {
            let j = (rand::random::<u64>() % (i as u64 + 1)) as usize;
            chars.swap(i, j);
        }
        Ok(Value::string(chars.into_iter().collect()))
    }),
    func!("bcrypt", [Str], |_, a| Ok(Value::string(bcrypt_hash(s(
        &a[0]
    ))?))),
    func!("htpasswd", [Str, Str], |_, a| {
        let user = s(&a[0]);
        if user.contains(':') {
            return Ok(Value::string(format!("invalid username: {user}")));
        }
        Ok(Value::string(format!("{user}:{}", bcrypt_hash(s(&a[1]))?)))
    }),
];

fn bcrypt_hash(p: &str) -> Result<String, super::FnError> {
    bcrypt::hash(p, bcrypt::DEFAULT_COST)
        .map(|h| h.replacen("$2b$", "$2a$", 1))
        .map_err(|e| e.to_string().into())
}

pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Go's `hash/adler32`.
pub fn adler32(data: &[u8]) -> u32 {
    let (mut a, mut b) = (1u32, 0u32);
    for &x in data {
        a = (a + u32::from(x)) % 65521;
        b = (b + a) % 65521;
    }
    (b << 16) | a
}

fn rand_from(ex: &Exec<'_>, count: i64, alphabet: &[u8]) -> FnResult {
    if count < 0 {
        return Err(format!("Requested random string length {count} is less than 0.").into());
    }
    check_len(ex, count as usize)?;
    let out: String = (0..count)
        .map(|_| alphabet[(rand::random::<u64>() % alphabet.len() as u64) as usize] as char)
        .collect();
    Ok(Value::string(out))
}

fn uuid_v4() -> String {
    let mut b: [u8; 16] = rand::random();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex(&b);
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}
