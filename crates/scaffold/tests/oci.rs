//! `create api --helm-chart oci://…` against a real OCI registry: CNCF distribution 2.8
//! (Debian's `docker-registry`, installed by scripts/setup-oci-registry.sh), started by each
//! test on a free loopback port with its storage in a temporary directory. The charts are
//! pushed as Helm pushes them, through the distribution API (blob uploads, then an OCI
//! manifest whose config is Helm's), and then scaffolded from.
//!
//! Without the registry binary the tests say so and skip, except in CI (`CI=true`), where its
//! absence fails them.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod support;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bosun_scaffold::commands::{self, ApiOptions, InitOptions};
use bosun_scaffold::Plugin;
use sha2::{Digest, Sha256};
use support::{files, NoDerive};

const CHART_LAYER: &str = "application/vnd.cncf.helm.chart.content.v1.tar+gzip";
const HELM_CONFIG: &str = "application/vnd.cncf.helm.config.v1+json";
const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";

// ---------------------------------------------------------------------------------------
// The chart: a ConfigMap whose data come from the values.

fn chart_files(version: &str) -> Vec<(String, String)> {
    vec![
        (
            "Chart.yaml".into(),
            format!("apiVersion: v2\nname: tiny\ndescription: A tiny chart\nversion: {version}\nappVersion: \"1.0\"\n"),
        ),
        ("values.yaml".into(), "greeting: hello\nreplicas: 2\n".into()),
        (
            "templates/configmap.yaml".into(),
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-tiny\ndata:\n  greeting: {{ .Values.greeting | quote }}\n  replicas: {{ .Values.replicas | quote }}\n  chart: {{ .Chart.Version | quote }}\n".into(),
        ),
    ]
}

/// `helm package`'s layout: the files under the chart's directory, gzipped.
fn archive(version: &str) -> Vec<u8> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let mut tar = tar::Builder::new(gz);
    for (rel, text) in chart_files(version) {
        let mut h = tar::Header::new_gnu();
        h.set_size(text.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        tar.append_data(&mut h, format!("tiny/{rel}"), text.as_bytes())
            .unwrap();
    }
    tar.into_inner().unwrap().finish().unwrap()
}

fn digest(data: &[u8]) -> String {
    let hex: String = Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256:{hex}")
}

// ---------------------------------------------------------------------------------------
// A blocking HTTP/1.1 client for the test's side (pushing, probing): one request per
// connection, `Connection: close`, the answer read to its end.

struct Resp {
    status: u16,
    headers: BTreeMap<String, String>,
    body: Vec<u8>,
}

fn request(
    method: &str,
    url: &str,
    headers: &[(&str, String)],
    body: &[u8],
) -> std::io::Result<Resp> {
    let rest = url.strip_prefix("http://").expect("an http:// URL");
    let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let path = if path.is_empty() { "/" } else { path };
    let mut conn = TcpStream::connect(host)?;
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    conn.write_all(head.as_bytes())?;
    conn.write_all(body)?;
    let mut all = Vec::new();
    conn.read_to_end(&mut all)?;
    let split = all
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("an HTTP answer");
    let head = String::from_utf8_lossy(&all[..split]).into_owned();
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .expect("a status line");
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect::<BTreeMap<_, _>>();
    let mut body = all[split + 4..].to_vec();
    if headers.get("transfer-encoding").map(String::as_str) == Some("chunked") {
        body = unchunk(&body);
    }
    Ok(Resp {
        status,
        headers,
        body,
    })
}

fn unchunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let Some(eol) = data.windows(2).position(|w| w == b"\r\n") else {
            return out;
        };
        let size =
            usize::from_str_radix(String::from_utf8_lossy(&data[..eol]).trim(), 16).unwrap_or(0);
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&data[eol + 2..eol + 2 + size]);
        data = &data[eol + 2 + size + 2..];
    }
}

// ---------------------------------------------------------------------------------------
// Token auth: a token service on a loopback port that gives anonymous pull tokens, signed
// (ES256, the certificate in the header's x5c) by a key whose certificate the registry trusts.

fn b64(data: &[u8], url: bool) -> String {
    let table: &[u8; 64] = if url {
        b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    } else {
        b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    };
    let mut out = String::new();
    for chunk in data.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(table[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
        if !url {
            out.push_str(&"=".repeat(3 - chunk.len()));
        }
    }
    out
}

/// An ECDSA signature as DER (`SEQUENCE { r INTEGER, s INTEGER }`) → JWS's `r || s`.
fn jws_signature(der: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut i = 2;
    for _ in 0..2 {
        assert_eq!(der[i], 2, "an INTEGER");
        let len = der[i + 1] as usize;
        let int = &der[i + 2..i + 2 + len];
        let int = &int[int.len().saturating_sub(32)..];
        out.extend(std::iter::repeat_n(0, 32 - int.len()));
        out.extend_from_slice(int);
        i += 2 + len;
    }
    out
}

struct Tokens {
    cert_der: Vec<u8>,
    cert_pem: String,
    key: Arc<dyn rustls::sign::SigningKey>,
}

const ISSUER: &str = "bosun-test-issuer";
const SERVICE: &str = "bosun-test-registry";

impl Tokens {
    fn new() -> Tokens {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["bosun-test-issuer".to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let der = rustls::pki_types::PrivateKeyDer::try_from(key.serialize_der()).unwrap();
        Tokens {
            cert_der: cert.der().to_vec(),
            cert_pem: cert.pem(),
            key: rustls::crypto::ring::sign::any_ecdsa_type(&der).unwrap(),
        }
    }

    /// A token for `repository:<name>:<actions>`.
    fn mint(&self, name: &str, actions: &[&str]) -> String {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let header =
            serde_json::json!({"typ": "JWT", "alg": "ES256", "x5c": [b64(&self.cert_der, false)]});
        let claims = serde_json::json!({
            "iss": ISSUER, "sub": "", "aud": SERVICE, "exp": now + 600, "nbf": now - 10,
            "iat": now, "jti": format!("{name}-{now}"),
            "access": [{"type": "repository", "name": name, "actions": actions}],
        });
        let signed = format!(
            "{}.{}",
            b64(header.to_string().as_bytes(), true),
            b64(claims.to_string().as_bytes(), true)
        );
        let signer = self
            .key
            .choose_scheme(&[rustls::SignatureScheme::ECDSA_NISTP256_SHA256])
            .unwrap();
        let sig = jws_signature(&signer.sign(signed.as_bytes()).unwrap());
        format!("{signed}.{}", b64(&sig, true))
    }
}

/// The token service: answers `GET /token?service=…&scope=repository:NAME:pull` with a pull
/// token, except for repositories under `private/` (401, as for an anonymous client there).
/// Returns its realm and the query strings it was asked.
fn token_service(tokens: Arc<Tokens>) -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let realm = format!("http://{}/token", listener.local_addr().unwrap());
    let asked = Arc::new(Mutex::new(Vec::new()));
    let seen = asked.clone();
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            let mut reader = BufReader::new(conn.try_clone().unwrap());
            let mut line = String::new();
            let _ = reader.read_line(&mut line);
            loop {
                let mut h = String::new();
                if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                    break;
                }
            }
            let target = line.split_whitespace().nth(1).unwrap_or("").to_string();
            let query = target
                .split_once('?')
                .map(|(_, q)| q)
                .unwrap_or("")
                .to_string();
            seen.lock().unwrap().push(query.clone());
            let scope = query
                .split('&')
                .find_map(|p| p.strip_prefix("scope="))
                .map(|s| {
                    s.replace("%3A", ":")
                        .replace("%2F", "/")
                        .replace("%2C", ",")
                })
                .unwrap_or_default();
            let name = scope.split(':').nth(1).unwrap_or("").to_string();
            let (status, body) = if name.starts_with("private/") || name.is_empty() {
                (
                    "401 Unauthorized",
                    r#"{"details":"access denied"}"#.to_string(),
                )
            } else {
                (
                    "200 OK",
                    serde_json::json!({"token": tokens.mint(&name, &["pull"])}).to_string(),
                )
            };
            let _ = conn.write_all(
                format!(
                    "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                )
                .as_bytes(),
            );
        }
    });
    (realm, asked)
}

// ---------------------------------------------------------------------------------------
// The registry.

enum Auth {
    None,
    /// distribution's token auth, trusting `Tokens`' certificate.
    Token(Arc<Tokens>, String),
    /// HTTP Basic against an htpasswd file (the registry writes one with a random password).
    Htpasswd,
}

struct Registry {
    child: Child,
    dir: tempfile::TempDir,
    /// `127.0.0.1:PORT`.
    host: String,
    /// The token the test pushes with, under token auth.
    push_token: Option<Arc<Tokens>>,
}

/// The registry binary; None (the test then skips, saying why) when absent outside CI.
fn registry_binary() -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join("docker-registry"))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        let why = "docker-registry (CNCF distribution) is not installed: run scripts/setup-oci-registry.sh";
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{why} (CI must run these tests)"
        );
        eprintln!("SKIPPED: {why}");
    }
    found
}

impl Registry {
    fn start(auth: Auth) -> Option<Registry> {
        let bin = registry_binary()?;
        let dir = tempfile::tempdir().unwrap();
        let (auth_yaml, push_token) = match auth {
            Auth::None => (String::new(), None),
            Auth::Token(tokens, realm) => {
                let pem = dir.path().join("token-issuer.pem");
                std::fs::write(&pem, &tokens.cert_pem).unwrap();
                (
                    format!(
                        "auth:\n  token:\n    realm: {realm}\n    service: {SERVICE}\n    issuer: {ISSUER}\n    rootcertbundle: {}\n",
                        pem.display()
                    ),
                    Some(tokens),
                )
            }
            Auth::Htpasswd => (
                format!(
                    "auth:\n  htpasswd:\n    realm: bosun-test\n    path: {}\n",
                    dir.path().join("htpasswd").display()
                ),
                None,
            ),
        };
        // A free port is taken between its probe and the registry's bind only by a race:
        // then the registry exits, and another port is tried.
        for _ in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let host = format!("127.0.0.1:{port}");
            let config = dir.path().join("config.yml");
            std::fs::write(
                &config,
                format!(
                    "version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: {host}\n  secret: bosun-test-secret\n{auth_yaml}",
                    dir.path().join("data").display()
                ),
            )
            .unwrap();
            let log = std::fs::File::create(dir.path().join("registry.log")).unwrap();
            let mut child = Command::new(&bin)
                .arg("serve")
                .arg(&config)
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .stdin(Stdio::null())
                .spawn()
                .expect("docker-registry starts");
            // Ready when /v2/ answers (200, or 401 under auth).
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                if let Ok(r) = request("GET", &format!("http://{host}/v2/"), &[], b"") {
                    if r.status == 200 || r.status == 401 {
                        return Some(Registry {
                            child,
                            dir,
                            host,
                            push_token,
                        });
                    }
                }
                assert!(
                    Instant::now() < deadline,
                    "the registry did not answer within 30 s: {}",
                    std::fs::read_to_string(dir.path().join("registry.log")).unwrap_or_default()
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        panic!(
            "the registry did not start: {}",
            std::fs::read_to_string(dir.path().join("registry.log")).unwrap_or_default()
        );
    }

    fn auth(&self, repo: &str) -> Vec<(&'static str, String)> {
        match &self.push_token {
            Some(t) => vec![(
                "Authorization",
                format!("Bearer {}", t.mint(repo, &["pull", "push"])),
            )],
            None => vec![],
        }
    }

    /// A monolithic blob upload: POST for an upload URL, PUT the bytes with their digest.
    fn push_blob(&self, repo: &str, data: &[u8]) -> String {
        let d = digest(data);
        let started = request(
            "POST",
            &format!("http://{}/v2/{repo}/blobs/uploads/", self.host),
            &self.auth(repo),
            b"",
        )
        .unwrap();
        assert_eq!(
            started.status,
            202,
            "{}",
            String::from_utf8_lossy(&started.body)
        );
        let location = &started.headers["location"];
        let location = if location.starts_with("http") {
            location.clone()
        } else {
            format!("http://{}{location}", self.host)
        };
        let sep = if location.contains('?') { '&' } else { '?' };
        let mut headers = self.auth(repo);
        headers.push(("Content-Type", "application/octet-stream".into()));
        let put = request(
            "PUT",
            &format!("{location}{sep}digest={}", d.replace(':', "%3A")),
            &headers,
            data,
        )
        .unwrap();
        assert_eq!(put.status, 201, "{}", String::from_utf8_lossy(&put.body));
        d
    }

    /// Pushes an OCI manifest with this config and these layers under `tag`; returns its digest.
    fn push(
        &self,
        repo: &str,
        tag: &str,
        config: (&str, &[u8]),
        layers: &[(&str, &[u8])],
    ) -> String {
        let desc = |media: &str, data: &[u8]| serde_json::json!({"mediaType": media, "digest": self.push_blob(repo, data), "size": data.len()});
        let manifest = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": desc(config.0, config.1),
            "layers": layers.iter().map(|(m, d)| desc(m, d)).collect::<Vec<_>>(),
        })
        .to_string();
        let mut headers = self.auth(repo);
        headers.push(("Content-Type", OCI_MANIFEST.into()));
        let put = request(
            "PUT",
            &format!("http://{}/v2/{repo}/manifests/{tag}", self.host),
            &headers,
            manifest.as_bytes(),
        )
        .unwrap();
        assert_eq!(put.status, 201, "{}", String::from_utf8_lossy(&put.body));
        digest(manifest.as_bytes())
    }

    /// `helm push tiny-VERSION.tgz oci://HOST/charts`: the tag is the version, `+` as `_`.
    fn push_chart(&self, repo: &str, version: &str) -> Vec<u8> {
        let tgz = archive(version);
        let config =
            serde_json::json!({"apiVersion": "v2", "name": "tiny", "version": version}).to_string();
        self.push(
            repo,
            &version.replace('+', "_"),
            (HELM_CONFIG, config.as_bytes()),
            &[(CHART_LAYER, &tgz)],
        );
        tgz
    }

    /// Where the filesystem storage keeps a blob's bytes.
    fn blob_file(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").unwrap();
        self.dir
            .path()
            .join("data/docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }

    fn oci(&self, repo: &str) -> String {
        format!("oci://{}/{repo}", self.host)
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---------------------------------------------------------------------------------------

fn opts(chart: &str, version: Option<&str>) -> ApiOptions {
    ApiOptions {
        helm_chart: Some(chart.into()),
        helm_chart_version: version.map(String::from),
        ..Default::default()
    }
}

fn api(o: &ApiOptions) -> bosun_scaffold::commands::Api {
    bosun_scaffold::helm::api(o).unwrap_or_else(|e| panic!("{e}"))
}

fn err(o: &ApiOptions) -> String {
    match bosun_scaffold::helm::api(o) {
        Ok(_) => panic!("expected an error"),
        Err(e) => e.to_string(),
    }
}

/// The API a local archive of `version` gives: what a pull must give too.
fn from_archive(version: &str) -> (tempfile::TempDir, bosun_scaffold::commands::Api) {
    let dir = tempfile::tempdir().unwrap();
    let tgz = dir.path().join(format!("tiny-{version}.tgz"));
    std::fs::write(&tgz, archive(version)).unwrap();
    let a = api(&opts(tgz.to_str().unwrap(), None));
    (dir, a)
}

fn assert_same(pulled: &bosun_scaffold::commands::Api, version: &str) {
    let (_d, local) = from_archive(version);
    assert_eq!(pulled.files.files, local.files.files, "version {version}");
    assert_eq!(pulled.sample_spec, local.sample_spec);
    assert_eq!(
        (&pulled.group, &pulled.version, &pulled.kind),
        (&local.group, &local.version, &local.kind)
    );
    assert_eq!(pulled.kind, "Tiny");
}

fn chart_version(a: &bosun_scaffold::commands::Api) -> String {
    let chart = String::from_utf8(a.files.files["helm-charts/tiny/Chart.yaml"].clone()).unwrap();
    chart
        .lines()
        .find_map(|l| l.strip_prefix("version: "))
        .unwrap()
        .to_string()
}

/// Helm's choice of version: the highest stable semver tag when none is given (`+` pushed as
/// `_`, non-semver tags ignored), an exact version as its tag, a constraint among the tags.
#[test]
fn versions_are_chosen_as_helm_chooses_them() {
    let Some(reg) = Registry::start(Auth::None) else {
        return;
    };
    for v in ["0.9.0", "0.10.0", "1.0.0+build.1", "1.1.0-rc.1"] {
        reg.push_chart("charts/tiny", v);
    }
    // A tag that is no version, on 0.9.0's manifest.
    let config =
        serde_json::json!({"apiVersion": "v2", "name": "tiny", "version": "0.9.0"}).to_string();
    let latest = reg.push(
        "charts/tiny",
        "latest",
        (HELM_CONFIG, config.as_bytes()),
        &[(CHART_LAYER, &archive("0.9.0"))],
    );
    let url = reg.oci("charts/tiny");
    for (version, want) in [
        (None, "1.0.0+build.1"),
        (Some("0.9.0"), "0.9.0"),
        (Some("~0.10"), "0.10.0"),
        (Some("1.0.0+build.1"), "1.0.0+build.1"),
        (Some("1.1.0-rc.1"), "1.1.0-rc.1"),
    ] {
        let a = api(&opts(&url, version));
        assert_eq!(chart_version(&a), want, "--helm-chart-version {version:?}");
        assert_same(&a, want);
    }
    // A tag in the reference, and the registry as --helm-chart-repo (the chart's name joined).
    assert_eq!(
        chart_version(&api(&opts(&format!("{url}:latest"), None))),
        "0.9.0"
    );
    assert_eq!(
        chart_version(&api(&opts(&format!("{url}:0.10.0"), Some("0.10.0")))),
        "0.10.0"
    );
    // A digest in the reference: that manifest, checked against it.
    assert_eq!(
        chart_version(&api(&opts(&format!("{url}@{latest}"), None))),
        "0.9.0"
    );
    let e = err(&opts(&format!("{url}@sha256:{}", "0".repeat(64)), None));
    assert!(
        e.contains("MANIFEST_UNKNOWN") && !e.contains("no such repository"),
        "{e}"
    );
    let mut via_repo = opts("tiny", Some("0.9.0"));
    via_repo.helm_chart_repo = Some(reg.oci("charts"));
    assert_eq!(chart_version(&api(&via_repo)), "0.9.0");
}

fn project(chart: &str) -> (tempfile::TempDir, BTreeMap<String, Vec<u8>>) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("tiny-operator");
    std::fs::create_dir(&dir).unwrap();
    let init = InitOptions {
        domain: Some("example.com".into()),
        ..Default::default()
    };
    commands::init(&dir, Plugin::Helm, &init, &NoDerive::Empty).unwrap();
    commands::create_api(&dir, None, &opts(chart, None), &NoDerive::Empty)
        .unwrap_or_else(|e| panic!("{e}"));
    let files = files(&dir)
        .into_iter()
        .map(|rel| {
            let bytes = std::fs::read(dir.join(&rel)).unwrap();
            (rel, bytes)
        })
        .collect();
    (tmp, files)
}

/// A project scaffolded from the registry is byte for byte the project scaffolded from the
/// chart's archive, and its chart renders the sample's values.
#[test]
fn a_pulled_chart_scaffolds_what_its_archive_does_and_renders() {
    let Some(reg) = Registry::start(Auth::None) else {
        return;
    };
    let tgz = reg.push_chart("charts/tiny", "0.10.0");
    let (_a, pulled) = project(&reg.oci("charts/tiny"));
    let local = tempfile::tempdir().unwrap();
    let path = local.path().join("tiny-0.10.0.tgz");
    std::fs::write(&path, tgz).unwrap();
    let (tmp, archived) = project(path.to_str().unwrap());
    assert_eq!(
        pulled.keys().collect::<Vec<_>>(),
        archived.keys().collect::<Vec<_>>()
    );
    assert_eq!(pulled, archived);
    let watches = String::from_utf8(pulled["watches.yaml"].clone()).unwrap();
    assert!(watches.contains("chart: helm-charts/tiny"), "{watches}");
    // The chart the watches entry names loads and renders, with the sample's spec as values.
    let sample =
        String::from_utf8(pulled["config/samples/charts_v1alpha1_tiny.yaml"].clone()).unwrap();
    let sample: serde_yaml::Value = serde_yaml::from_str(&sample).unwrap();
    assert_eq!(sample["spec"]["greeting"], serde_yaml::Value::from("hello"));
    let chart = bosun_helm::render::Chart::load(&tmp.path().join("tiny-operator/helm-charts/tiny"))
        .unwrap();
    let rendered = chart
        .render(&bosun_helm::render::RenderOptions::new("sample", "default"))
        .unwrap();
    let cm = &rendered.files["tiny/templates/configmap.yaml"];
    for want in [
        "name: sample-tiny",
        "greeting: \"hello\"",
        "replicas: \"2\"",
        "chart: \"0.10.0\"",
    ] {
        assert!(cm.contains(want), "{want} in {cm}");
    }
}

/// What goes wrong is said: a missing tag or version, a missing repository, an image that is
/// no chart, bytes that are not the ones the manifest names, a registry that is not there, a
/// registry that wants credentials.
#[test]
fn clear_errors() {
    let Some(reg) = Registry::start(Auth::None) else {
        return;
    };
    reg.push_chart("charts/tiny", "0.9.0");
    reg.push_chart("charts/tiny", "0.10.0");
    let url = reg.oci("charts/tiny");

    let e = err(&opts(&url, Some("3.0.0")));
    assert!(
        e.contains("no tag 3.0.0") && e.contains("MANIFEST_UNKNOWN"),
        "{e}"
    );
    assert!(
        e.contains("0.9.0") && e.contains("0.10.0") && e.contains("--helm-chart-version"),
        "{e}"
    );
    let e = err(&opts(&url, Some("^5")));
    assert!(
        e.contains("no version ^5 among its tags (0.9.0, 0.10.0)")
            || e.contains("no version ^5 among its tags (0.10.0, 0.9.0)"),
        "{e}"
    );

    let e = err(&opts(&reg.oci("charts/nothing"), None));
    assert!(
        e.contains("NAME_UNKNOWN") && e.contains("no such repository"),
        "{e}"
    );

    // A container image: an image config and a plain layer.
    reg.push(
        "images/app",
        "1.0.0",
        (
            "application/vnd.oci.image.config.v1+json",
            br#"{"architecture":"amd64","os":"linux"}"#,
        ),
        &[(
            "application/vnd.oci.image.layer.v1.tar+gzip",
            &archive("1.0.0"),
        )],
    );
    let e = err(&opts(&reg.oci("images/app"), None));
    assert!(
        e.contains("is not a Helm chart") && e.contains(CHART_LAYER),
        "{e}"
    );
    assert!(
        e.contains("application/vnd.oci.image.layer.v1.tar+gzip"),
        "{e}"
    );

    // The storage's copy of 0.9.0's chart layer altered (same size): the registry serves it.
    let tgz = archive("0.9.0");
    let file = reg.blob_file(&digest(&tgz));
    let mut bytes = std::fs::read(&file).unwrap();
    assert_eq!(bytes, tgz);
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&file, bytes).unwrap();
    let e = err(&opts(&url, Some("0.9.0")));
    assert!(
        e.contains("digest mismatch") && e.contains(&digest(&tgz)),
        "{e}"
    );
    // The other version is intact.
    assert_eq!(chart_version(&api(&opts(&url, Some("0.10.0")))), "0.10.0");

    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = format!("oci://{}/charts/tiny", closed.local_addr().unwrap());
    drop(closed);
    let e = err(&opts(&dead, None));
    assert!(
        e.contains("is unreachable") && e.contains("plain HTTP"),
        "{e}"
    );

    let e = err(&opts(&format!("oci://{}/Charts/Tiny", reg.host), None));
    assert!(e.contains("not an OCI chart reference"), "{e}");
    let e = err(&opts(&format!("{url}:0.9.0"), Some("0.10.0")));
    assert!(e.contains("give the version once"), "{e}");
    let mut both = opts(&url, None);
    both.helm_chart_repo = Some("https://charts.example".into());
    assert!(err(&both).contains("leave out --helm-chart-repo"));

    let Some(basic) = Registry::start(Auth::Htpasswd) else {
        return;
    };
    let e = err(&opts(&basic.oci("charts/tiny"), None));
    assert!(
        e.contains("asks for credentials") && e.contains("helm registry login"),
        "{e}"
    );
}

/// A registry with token auth (distribution's `auth.token`): bosun asks the realm of the 401's
/// Bearer challenge for an anonymous token with the challenge's service and scope, and pulls
/// with it; a repository the token service refuses is refused with the way around.
#[test]
fn anonymous_bearer_tokens_are_asked_for_and_used() {
    if registry_binary().is_none() {
        return;
    }
    let tokens = Arc::new(Tokens::new());
    let (realm, asked) = token_service(tokens.clone());
    let Some(reg) = Registry::start(Auth::Token(tokens, realm)) else {
        return;
    };
    reg.push_chart("charts/tiny", "0.9.0");
    reg.push_chart("charts/tiny", "0.10.0");
    reg.push_chart("private/tiny", "0.9.0");
    // Without a token the registry refuses: the auth is real.
    let anon = request(
        "GET",
        &format!("http://{}/v2/charts/tiny/tags/list", reg.host),
        &[],
        b"",
    )
    .unwrap();
    assert_eq!(anon.status, 401);
    assert!(
        anon.headers["www-authenticate"].starts_with("Bearer realm="),
        "{:?}",
        anon.headers
    );

    let a = api(&opts(&reg.oci("charts/tiny"), None));
    assert_eq!(chart_version(&a), "0.10.0");
    assert_same(&a, "0.10.0");
    let asked = asked.lock().unwrap().clone();
    assert!(!asked.is_empty());
    for q in &asked {
        assert!(q.contains(&format!("service={SERVICE}")), "{q}");
        assert!(q.contains("scope=repository%3Acharts%2Ftiny%3Apull"), "{q}");
    }

    let e = err(&opts(&reg.oci("private/tiny"), None));
    assert!(
        e.contains("refused an anonymous pull token") && e.contains("helm registry login"),
        "{e}"
    );
}
