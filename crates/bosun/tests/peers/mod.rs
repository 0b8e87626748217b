//! What the differential tests against operator-sdk's operators share: where the peers are,
//! the seed's BookStore kind, a running operator process, and a CR's conditions.
#![allow(dead_code)]
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kube::core::{ApiResource, DynamicObject, GroupVersionKind};

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Where `scripts/setup-peers.sh` installs the peers: `$BOSUN_PEERS`, else the cache directory
/// named after the operator-sdk release pinned in scripts/peers/go.mod.
pub fn peers() -> PathBuf {
    if let Some(dir) = std::env::var_os("BOSUN_PEERS") {
        return PathBuf::from(dir);
    }
    let gomod = std::fs::read_to_string(repo().join("scripts/peers/go.mod"))
        .expect("scripts/peers/go.mod pins the peers");
    let version = gomod
        .lines()
        .filter_map(|l| {
            l.trim()
                .strip_prefix("github.com/operator-framework/operator-sdk ")
        })
        .find_map(|rest| rest.split_whitespace().next())
        .expect("scripts/peers/go.mod requires github.com/operator-framework/operator-sdk");
    let home = std::env::var_os("HOME").expect("HOME");
    Path::new(&home).join(".cache/bosun/peers").join(version)
}

/// The peer binary `name`; a missing one fails the test naming the script that builds it.
pub fn peer(name: &str) -> PathBuf {
    let p = peers().join(name);
    assert!(
        p.is_file(),
        "{} is missing: run `bash scripts/setup-peers.sh` first (or `bash scripts/test-peers.sh`, \
         which runs it and these tests)",
        p.display()
    );
    p
}

pub fn bookstores() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("charts.example.com", "v1alpha1", "BookStore"),
        "bookstores",
    )
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

pub fn conditions(o: &DynamicObject) -> BTreeMap<String, (String, String)> {
    o.data["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            (
                c["type"].as_str().unwrap_or_default().to_string(),
                (
                    c["status"].as_str().unwrap_or_default().to_string(),
                    c["reason"].as_str().unwrap_or_default().to_string(),
                ),
            )
        })
        .collect()
}

/// An operator process, killed when dropped (a failing assertion must not leave it running).
pub struct Running(pub tokio::process::Child);

impl Running {
    pub async fn stop(mut self) {
        let _ = self.0.start_kill();
        let _ = self.0.wait().await;
    }
}
