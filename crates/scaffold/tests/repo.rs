//! `create api --helm-chart NAME --helm-chart-repo URL`: against a loopback HTTP server this
//! test starts, serving an `index.yaml` and archives built from the bosun crate's test chart.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bosun_scaffold::commands::ApiOptions;
use sha2::{Digest, Sha256};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../bosun/tests/charts/greeter")
}

/// The fixture chart as a `.tgz` (files under `greeter/`), its Chart.yaml at `version`.
fn archive(version: &str) -> Vec<u8> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let mut tar = tar::Builder::new(gz);
    for rel in [
        "Chart.yaml",
        "values.yaml",
        "templates/configmap.yaml",
        "templates/deployment.yaml",
    ] {
        let mut data = std::fs::read(fixture().join(rel)).unwrap();
        if rel == "Chart.yaml" {
            data = String::from_utf8(data)
                .unwrap()
                .replace("version: 0.1.0", &format!("version: {version}"))
                .into_bytes();
        }
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        tar.append_data(&mut h, format!("greeter/{rel}"), &data[..])
            .unwrap();
    }
    tar.into_inner().unwrap().finish().unwrap()
}

fn sha256(data: &[u8]) -> String {
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Serves `files` (path → body; anything else is a 404) on a loopback port until the test
/// process ends; returns its base URL.
fn serve(files: HashMap<String, Vec<u8>>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let files = Arc::new(files);
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let mut reader = BufReader::new(conn.try_clone().unwrap());
            let mut line = String::new();
            if reader.read_line(&mut line).is_err() {
                continue;
            }
            let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
            // The headers, up to the blank line.
            loop {
                let mut h = String::new();
                if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                    break;
                }
            }
            // `/moved/…` answers 302 to the same path without the prefix, as repositories on
            // GitHub Pages or releases do.
            let (status, body, extra) = match (files.get(&path), path.strip_prefix("/moved")) {
                (Some(b), _) => ("200 OK", b.clone(), String::new()),
                (None, Some(to)) => ("302 Found", Vec::new(), format!("Location: {to}\r\n")),
                (None, None) => ("404 Not Found", b"not found".to_vec(), String::new()),
            };
            let head = format!(
                "HTTP/1.1 {status}\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = conn.write_all(head.as_bytes());
            let _ = conn.write_all(&body);
        }
    });
    base
}

/// A repository under `/charts` with greeter 0.9.0 (relative URL), 0.10.0 (host-absolute URL)
/// and 1.0.0-rc.1, each with its digest; `tamper` serves other bytes for 0.10.0.
fn repo(tamper: bool) -> String {
    let mut files = HashMap::new();
    let mut entries = String::new();
    for (v, url) in [
        ("0.9.0", "greeter-0.9.0.tgz".to_string()),
        ("0.10.0", "/dl/greeter-0.10.0.tgz".to_string()),
        ("1.0.0-rc.1", "greeter-1.0.0-rc.1.tgz".to_string()),
    ] {
        let data = archive(v);
        entries.push_str(&format!(
            "  - name: greeter\n    version: {v}\n    digest: {}\n    urls:\n    - {url}\n",
            sha256(&data)
        ));
        let served = if tamper && v == "0.10.0" {
            archive("0.10.1")
        } else {
            data
        };
        let path = match url.strip_prefix('/') {
            Some(_) => url.clone(),
            None => format!("/charts/{url}"),
        };
        files.insert(path, served);
    }
    files.insert(
        "/charts/index.yaml".into(),
        format!("apiVersion: v1\nentries:\n  greeter:\n{entries}").into_bytes(),
    );
    format!("{}/charts", serve(files))
}

fn opts(chart: &str, repo: Option<&str>, version: Option<&str>) -> ApiOptions {
    ApiOptions {
        helm_chart: Some(chart.into()),
        helm_chart_repo: repo.map(String::from),
        helm_chart_version: version.map(String::from),
        ..Default::default()
    }
}

fn chart_version(api: &bosun_scaffold::commands::Api) -> String {
    let chart = api
        .files
        .files
        .get("helm-charts/greeter/Chart.yaml")
        .map(|d| String::from_utf8(d.clone()).unwrap())
        .expect("the fetched chart's Chart.yaml");
    chart
        .lines()
        .find_map(|l| l.strip_prefix("version: "))
        .unwrap()
        .to_string()
}

fn err(o: &ApiOptions) -> String {
    match bosun_scaffold::helm::api(o) {
        Ok(_) => panic!("expected an error"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn the_latest_stable_version_by_semver_from_a_host_absolute_url() {
    let url = repo(false);
    let api = bosun_scaffold::helm::api(&opts("myrepo/greeter", Some(&url), None)).unwrap();
    // 0.10.0 > 0.9.0 (not string order), and 1.0.0-rc.1 is a pre-release.
    assert_eq!(chart_version(&api), "0.10.0");
    assert_eq!(api.kind, "Greeter");
    assert_eq!(api.group, "charts");
    assert_eq!(api.sample_spec["greeting"], serde_json::json!("Hello"));
}

#[test]
fn a_given_version_from_a_relative_url() {
    let url = repo(false);
    let api = bosun_scaffold::helm::api(&opts("greeter", Some(&url), Some("0.9.0"))).unwrap();
    assert_eq!(chart_version(&api), "0.9.0");
    let api = bosun_scaffold::helm::api(&opts("greeter", Some(&url), Some("1.0.0-rc.1"))).unwrap();
    assert_eq!(chart_version(&api), "1.0.0-rc.1");
}

#[test]
fn redirects_are_followed() {
    let url = repo(false);
    let (origin, path) = url.split_at(url.find("/charts").unwrap());
    let moved = format!("{origin}/moved{path}");
    let api = bosun_scaffold::helm::api(&opts("greeter", Some(&moved), Some("0.9.0"))).unwrap();
    assert_eq!(chart_version(&api), "0.9.0");
}

#[test]
fn a_digest_mismatch_is_refused() {
    let url = repo(true);
    let e = err(&opts("greeter", Some(&url), None));
    assert!(e.contains("digest mismatch"), "{e}");
    assert!(e.contains("/dl/greeter-0.10.0.tgz"), "{e}");
    // The other versions are intact.
    let api = bosun_scaffold::helm::api(&opts("greeter", Some(&url), Some("0.9.0"))).unwrap();
    assert_eq!(chart_version(&api), "0.9.0");
}

#[test]
fn clear_errors() {
    let url = repo(false);
    let e = err(&opts("myrepo/nginx", Some(&url), None));
    assert!(
        e.contains("chart \"nginx\" is not in") && e.contains("greeter"),
        "{e}"
    );
    let e = err(&opts("greeter", Some(&url), Some("3.0.0")));
    assert!(
        e.contains("has no version 3.0.0") && e.contains("0.9.0, 0.10.0"),
        "{e}"
    );
    // A port nothing listens on any more.
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = format!("http://{}/charts", closed.local_addr().unwrap());
    drop(closed);
    let e = err(&opts("greeter", Some(&dead), None));
    assert!(e.contains("is unreachable") && e.contains(&dead), "{e}");
    // A server without that repository.
    let e = err(&opts("greeter", Some(&format!("{url}/nothing")), None));
    assert!(e.contains("is unreachable") && e.contains("404"), "{e}");
    let e = err(&opts("myrepo/greeter", None, None));
    assert!(e.contains("--helm-chart-repo"), "{e}");
    let e = err(&opts(fixture().to_str().unwrap(), None, Some("1.0.0")));
    assert!(e.contains("--helm-chart-repo"), "{e}");
}
