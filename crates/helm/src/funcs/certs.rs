//! Sprig's key and certificate functions (`genPrivateKey`, `genCA`, `genSelfSignedCert`,
//! `genSignedCert` and their `WithKey` forms, `buildCustomCert`), AES (`encryptAES`,
//! `decryptAES`) and `derivePassword`. Keys are RSA 2048 like Sprig's (genPrivateKey
//! also makes `ecdsa` P-256 and `ed25519` keys); certificates are made by rcgen with
//! Sprig's fields (serial, CN, validity, key usages, IPs and DNS names). Output is random,
//! so it is never compared with Helm's; `decryptAES` is deterministic and matches.
use std::rc::Rc;

use aes::cipher::{block_padding::Pkcs7, BlockDecryptMut, BlockEncryptMut, KeyIvInit};
use hmac::Mac;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};
use rsa::pkcs1::{DecodeRsaPrivateKey, EncodeRsaPrivateKey};
use rsa::pkcs8::{EncodePrivateKey, LineEnding};

use super::{int, s, FnResult, FuncDef};
use crate::func;
use crate::value::object::Object;
use crate::value::{Kind, Value};

pub const FUNCS: &[FuncDef] = &[
    func!("genPrivateKey", [Str], |_, a| Ok(Value::string(
        gen_private_key(s(&a[0]))
    ))),
    func!("genCA", [Str, Int], |_, a| ca(s(&a[0]), int(&a[1]), None)),
    func!("genCAWithKey", [Str, Int, Str], |_, a| ca(
        s(&a[0]),
        int(&a[1]),
        Some(s(&a[2]))
    )),
    func!("genSelfSignedCert", [Str, List, List, Int], |_, a| leaf(
        s(&a[0]),
        &a[1],
        &a[2],
        int(&a[3]),
        None,
        None
    )),
    func!(
        "genSelfSignedCertWithKey",
        [Str, List, List, Int, Str],
        |_, a| leaf(s(&a[0]), &a[1], &a[2], int(&a[3]), None, Some(s(&a[4])))
    ),
    func!("genSignedCert", [Str, List, List, Int, Any], |_, a| leaf(
        s(&a[0]),
        &a[1],
        &a[2],
        int(&a[3]),
        Some(&a[4]),
        None
    )),
    func!(
        "genSignedCertWithKey",
        [Str, List, List, Int, Any, Str],
        |_, a| leaf(
            s(&a[0]),
            &a[1],
            &a[2],
            int(&a[3]),
            Some(&a[4]),
            Some(s(&a[5]))
        )
    ),
    func!("buildCustomCert", [Str, Str], |_, a| {
        let cert = crate::funcs::encoding::base64_decode(s(&a[0]))
            .map_err(|e| format!("unable to decode base64 certificate: {e}"))?;
        let key = crate::funcs::encoding::base64_decode(s(&a[1]))
            .map_err(|e| format!("unable to decode base64 private key: {e}"))?;
        let cert = String::from_utf8_lossy(&cert).into_owned();
        let key = String::from_utf8_lossy(&key).into_owned();
        if !cert.contains("BEGIN CERTIFICATE") {
            return Err("error parsing certificate: decoded PEM is blank".into());
        }
        Ok(Value::Obj(Rc::new(Certificate { cert, key })))
    }),
    func!("encryptAES", [Str, Str], |_, a| encrypt_aes(
        s(&a[0]),
        s(&a[1])
    )),
    func!("decryptAES", [Str, Str], |_, a| decrypt_aes(
        s(&a[0]),
        s(&a[1])
    )),
    func!("derivePassword", [Int, Str, Str, Str, Str], |_, a| Ok(
        Value::string(derive_password(
            int(&a[0]) as u32,
            s(&a[1]),
            s(&a[2]),
            s(&a[3]),
            s(&a[4])
        ))
    )),
];

/// Sprig's `certificate` struct.
pub struct Certificate {
    pub cert: String,
    pub key: String,
}

impl Object for Certificate {
    fn type_name(&self) -> &str {
        "sprig.certificate"
    }
    fn kind(&self) -> Kind {
        Kind::Struct
    }
    fn field_names(&self) -> &'static [&'static str] {
        &["Cert", "Key"]
    }
    fn field(&self, name: &str) -> Option<Value> {
        match name {
            "Cert" => Some(Value::str(&self.cert)),
            "Key" => Some(Value::str(&self.key)),
            _ => None,
        }
    }
}

fn rsa_key() -> Result<rsa::RsaPrivateKey, String> {
    rsa::RsaPrivateKey::new(&mut rsa::rand_core::OsRng, 2048).map_err(|e| e.to_string())
}

fn gen_private_key(typ: &str) -> String {
    let r = match typ {
        "" | "rsa" => rsa::RsaPrivateKey::new(&mut rsa::rand_core::OsRng, 4096)
            .map_err(|e| e.to_string())
            .and_then(|k| {
                k.to_pkcs1_pem(LineEnding::LF)
                    .map(|p| p.to_string())
                    .map_err(|e| e.to_string())
            }),
        "ecdsa" => KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
            .map(|k| k.serialize_pem())
            .map_err(|e| e.to_string()),
        "ed25519" => KeyPair::generate_for(&rcgen::PKCS_ED25519)
            .map(|k| k.serialize_pem())
            .map_err(|e| e.to_string()),
        other => Err(format!("Unknown type {other}")),
    };
    r.unwrap_or_else(|e| e)
}

/// An rcgen key pair for an RSA key in PKCS#1 or PKCS#8 PEM, or a new RSA key.
fn key_pair(pem: Option<&str>) -> Result<(KeyPair, String), String> {
    let key = match pem {
        Some(p) => rsa::RsaPrivateKey::from_pkcs1_pem(p)
            .or_else(|_| <rsa::RsaPrivateKey as rsa::pkcs8::DecodePrivateKey>::from_pkcs8_pem(p))
            .map_err(|_| "error decoding PEM private key".to_string())?,
        None => rsa_key()?,
    };
    let pkcs1 = key
        .to_pkcs1_pem(LineEnding::LF)
        .map_err(|e| e.to_string())?
        .to_string();
    let pkcs8 = key
        .to_pkcs8_pem(LineEnding::LF)
        .map_err(|e| e.to_string())?
        .to_string();
    let kp = KeyPair::from_pem_and_sign_algo(&pkcs8, &rcgen::PKCS_RSA_SHA256)
        .map_err(|e| e.to_string())?;
    Ok((kp, pkcs1))
}

fn validity(p: &mut CertificateParams, days: i64) {
    let now = time::OffsetDateTime::now_utc();
    p.not_before = now;
    p.not_after = now + time::Duration::days(days);
    let serial: [u8; 16] = rand::random();
    p.serial_number = Some(rcgen::SerialNumber::from_slice(&serial));
}

fn ca(cn: &str, days: i64, key: Option<&str>) -> FnResult {
    let (kp, key_pem) = key_pair(key)?;
    let mut p = CertificateParams::default();
    p.distinguished_name.push(DnType::CommonName, cn);
    validity(&mut p, days);
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.key_usages = vec![
        KeyUsagePurpose::KeyEncipherment,
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyCertSign,
    ];
    let cert = p.self_signed(&kp).map_err(|e| e.to_string())?;
    Ok(Value::Obj(Rc::new(Certificate {
        cert: cert.pem(),
        key: key_pem,
    })))
}

fn strings(v: &Value) -> Vec<String> {
    v.list_items()
        .unwrap_or_default()
        .iter()
        .map(crate::funcs::strings::strval)
        .collect()
}

fn leaf(
    cn: &str,
    ips: &Value,
    dns: &Value,
    days: i64,
    signer: Option<&Value>,
    key: Option<&str>,
) -> FnResult {
    let (kp, key_pem) = key_pair(key)?;
    let mut p = CertificateParams::default();
    p.distinguished_name.push(DnType::CommonName, cn);
    validity(&mut p, days);
    p.key_usages = vec![
        KeyUsagePurpose::KeyEncipherment,
        KeyUsagePurpose::DigitalSignature,
    ];
    p.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    let mut sans = Vec::new();
    for ip in strings(ips) {
        let addr: std::net::IpAddr = ip.parse().map_err(|_| format!("error parsing ip: {ip}"))?;
        sans.push(rcgen::SanType::IpAddress(addr));
    }
    for d in strings(dns) {
        sans.push(rcgen::SanType::DnsName(
            d.try_into().map_err(|e: rcgen::Error| e.to_string())?,
        ));
    }
    p.subject_alt_names = sans;
    let cert = match signer {
        None => p.self_signed(&kp).map_err(|e| e.to_string())?,
        Some(Value::Obj(o)) if o.type_name() == "sprig.certificate" => {
            let ca_cert = o
                .field("Cert")
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_default();
            let ca_key = o
                .field("Key")
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_default();
            let (ca_kp, _) = key_pair(Some(&ca_key))?;
            let ca_params = CertificateParams::from_ca_cert_pem(&ca_cert)
                .map_err(|e| format!("error parsing CA certificate: {e}"))?;
            let issuer = ca_params.self_signed(&ca_kp).map_err(|e| e.to_string())?;
            p.signed_by(&kp, &issuer, &ca_kp)
                .map_err(|e| e.to_string())?
        }
        Some(other) => {
            return Err(format!(
                "wrong type for value; expected sprig.certificate; got {}",
                other.type_name()
            )
            .into())
        }
    };
    Ok(Value::Obj(Rc::new(Certificate {
        cert: cert.pem(),
        key: key_pem,
    })))
}

type Enc = cbc::Encryptor<aes::Aes256>;
type Dec = cbc::Decryptor<aes::Aes256>;

fn aes_key(password: &str) -> [u8; 32] {
    let mut key = [0u8; 32];
    let p = password.as_bytes();
    let n = p.len().min(32);
    key[..n].copy_from_slice(&p[..n]);
    key
}

fn encrypt_aes(password: &str, plaintext: &str) -> FnResult {
    if plaintext.is_empty() {
        return Ok(Value::str(""));
    }
    let iv: [u8; 16] = rand::random();
    let ct = Enc::new(&aes_key(password).into(), &iv.into())
        .encrypt_padded_vec_mut::<Pkcs7>(plaintext.as_bytes());
    let mut out = iv.to_vec();
    out.extend_from_slice(&ct);
    Ok(Value::string(crate::funcs::encoding::base64_std(&out)))
}

fn decrypt_aes(password: &str, crypt: &str) -> FnResult {
    if crypt.is_empty() {
        return Ok(Value::str(""));
    }
    let data = crate::funcs::encoding::base64_decode(crypt)?;
    if data.len() < 16 {
        return Err("ciphertext too short".into());
    }
    let (iv, ct) = data.split_at(16);
    if ct.len() % 16 != 0 {
        return Err("crypto/cipher: input not full blocks".into());
    }
    let iv: [u8; 16] = iv.try_into().map_err(|_| "bad iv".to_string())?;
    let pt = Dec::new(&aes_key(password).into(), &iv.into())
        .decrypt_padded_vec_mut::<Pkcs7>(ct)
        .map_err(|_| "invalid padding".to_string())?;
    Ok(Value::string(String::from_utf8_lossy(&pt).into_owned()))
}

/// Sprig's `derivePassword`: the Master Password algorithm (scrypt, HMAC-SHA256, templates).
fn derive_password(counter: u32, typ: &str, password: &str, user: &str, site: &str) -> String {
    const SCOPE: &str = "com.lyndir.masterpassword";
    let templates: &[&str] = match typ {
        "maximum" => &["anoxxxxxxxxxxxxxxxxx", "axxxxxxxxxxxxxxxxxno"],
        "long" => &[
            "CvcvnoCvcvCvcv",
            "CvcvCvcvnoCvcv",
            "CvcvCvcvCvcvno",
            "CvccnoCvcvCvcv",
            "CvccCvcvnoCvcv",
            "CvccCvcvCvcvno",
            "CvcvnoCvccCvcv",
            "CvcvCvccnoCvcv",
            "CvcvCvccCvcvno",
            "CvcvnoCvcvCvcc",
            "CvcvCvcvnoCvcc",
            "CvcvCvcvCvccno",
            "CvccnoCvccCvcv",
            "CvccCvccnoCvcv",
            "CvccCvccCvcvno",
            "CvcvnoCvccCvcc",
            "CvcvCvccnoCvcc",
            "CvcvCvccCvccno",
            "CvccnoCvcvCvcc",
            "CvccCvcvnoCvcc",
            "CvccCvcvCvccno",
        ],
        "medium" => &["CvcnoCvc", "CvcCvcno"],
        "short" => &["Cvcn"],
        "basic" => &["aaanaaan", "aannaaan", "aaannaaa"],
        "pin" => &["nnnn"],
        _ => return format!("cannot find password template {typ}"),
    };
    let mut salt = SCOPE.as_bytes().to_vec();
    salt.extend_from_slice(&(user.len() as u32).to_be_bytes());
    salt.extend_from_slice(user.as_bytes());
    let mut key = [0u8; 64];
    let Ok(params) = scrypt::Params::new(15, 8, 2, 64) else {
        return String::new();
    };
    if scrypt::scrypt(password.as_bytes(), &salt, &params, &mut key).is_err() {
        return String::new();
    }
    let mut seed_input = SCOPE.as_bytes().to_vec();
    seed_input.extend_from_slice(&(site.len() as u32).to_be_bytes());
    seed_input.extend_from_slice(site.as_bytes());
    seed_input.extend_from_slice(&counter.to_be_bytes());
    let Ok(mut mac) = hmac::Hmac::<sha2::Sha256>::new_from_slice(&key) else {
        return String::new();
    };
    mac.update(&seed_input);
    let seed = mac.finalize().into_bytes();
    let tmpl = templates[seed[0] as usize % templates.len()];
    tmpl.chars()
        .enumerate()
        .map(|(i, c)| {
            let chars: &str = match c {
                'V' => "AEIOU",
                'C' => "BCDFGHJKLMNPQRSTVWXYZ",
                'v' => "aeiou",
                'c' => "bcdfghjklmnpqrstvwxyz",
                'A' => "AEIOUBCDFGHJKLMNPQRSTVWXYZ",
                'a' => "AEIOUaeiouBCDFGHJKLMNPQRSTVWXYZbcdfghjklmnpqrstvwxyz",
                'n' => "0123456789",
                'o' => "@&%?,=[]_:-+*$#!'^~;()/.",
                'x' => "AEIOUaeiouBCDFGHJKLMNPQRSTVWXYZbcdfghjklmnpqrstvwxyz0123456789!@#$%^&*()",
                _ => " ",
            };
            let b = chars.as_bytes();
            b[seed[(i + 1) % seed.len()] as usize % b.len()] as char
        })
        .collect()
}
