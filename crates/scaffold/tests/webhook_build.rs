//! The proof of `create webhook` and of a second version: a scaffolded operator with a kind in
//! two versions (v1alpha1 the hub, v1 a spoke) and defaulting, validating and conversion
//! webhooks compiles against this workspace's crates, and its generated tests pass — among
//! them `tests/memcached_webhook.rs`, where the real kube-apiserver (bosun's test control
//! plane) calls the operator's webhooks: an invalid object is refused, a left-out field is
//! defaulted, and an object made as v1 is read back as v1alpha1 and as v1 through the
//! conversion webhook. Ignored by default (a cargo build of the generated project, minutes):
//! `cargo test -p bosun-scaffold --test webhook_build -- --ignored`.
mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use bosun_scaffold::commands::{self, ApiOptions, InitOptions, WebhookOptions};
use bosun_scaffold::Plugin;
use support::NoDerive;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the workspace")
}

fn api(version: &str) -> ApiOptions {
    ApiOptions {
        group: Some("cache".into()),
        version: Some(version.into()),
        kind: Some("Memcached".into()),
        ..Default::default()
    }
}

#[test]
#[ignore = "runs a second cargo build of a generated project (minutes); scripts/test.sh runs it with --ignored right after the workspace tests"]
fn a_scaffolded_operator_with_webhooks_and_two_versions_builds_and_its_webhooks_answer() {
    let dir = tempfile::tempdir().expect("dir");
    let project = "scaffolded-webhook-op";
    commands::init(
        dir.path(),
        Plugin::Rust,
        &InitOptions {
            domain: Some("example.com".into()),
            project_name: Some(project.into()),
            bosun_source: Some(workspace()),
            ..Default::default()
        },
        &NoDerive::Refuse,
    )
    .expect("init");
    commands::create_api(dir.path(), None, &api("v1alpha1"), &NoDerive::Refuse).expect("api");
    commands::create_api(dir.path(), None, &api("v1"), &NoDerive::Refuse).expect("v1");
    commands::create_webhook(
        dir.path(),
        &WebhookOptions {
            group: Some("cache".into()),
            version: Some("v1alpha1".into()),
            kind: Some("Memcached".into()),
            defaulting: true,
            programmatic_validation: true,
            conversion: true,
            spoke: vec![],
        },
    )
    .expect("create webhook");
    std::fs::copy(
        workspace().join("Cargo.lock"),
        dir.path().join("Cargo.lock"),
    )
    .expect("the lock file");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|t| {
            if t.is_absolute() {
                t
            } else {
                workspace().join(t)
            }
        })
        .unwrap_or_else(|| workspace().join("target"));
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(&cargo);
    // What cargo set for this test process is not a build's environment: a build script
    // watching such a variable would rebuild everything above it (see rust_plugin.rs).
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy().into_owned();
        let set_by_cargo = [
            "CARGO_MANIFEST_",
            "CARGO_PKG_",
            "CARGO_CRATE_",
            "CARGO_BIN_",
            "CARGO_PRIMARY_PACKAGE",
            "CARGO_TARGET_TMPDIR",
            "CARGO_RUSTC_CURRENT_DIR",
            "OUT_DIR",
        ]
        .iter()
        .any(|p| key.starts_with(p));
        if set_by_cargo {
            cmd.env_remove(&key);
        }
    }
    let out = cmd
        .args(["test", "--offline", "--", "--test-threads=2"])
        .current_dir(dir.path())
        .env("CARGO_TARGET_DIR", &target)
        .output()
        .expect("cargo runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "the scaffolded project's tests failed:\n{text}"
    );
    for test in [
        "the_api_server_calls_the_webhooks ... ok",
        "every_version_is_served_and_only_the_hub_stored ... ok",
        "each_version_goes_to_the_hub_and_back_unchanged ... ok",
    ] {
        assert!(text.contains(test), "{test} did not run:\n{text}");
    }

    // Its binary: the CRD with both versions, and the bundle `make bundle` writes, with the
    // three webhooks as the CSV's definitions.
    let bin = target.join("debug").join(project);
    let run = |args: &[&str]| {
        Command::new(&bin)
            .args(args)
            .current_dir(dir.path())
            .output()
            .expect("the operator's binary runs")
    };
    let crd = run(&["crd"]);
    let crd = String::from_utf8_lossy(&crd.stdout);
    assert!(
        crd.contains("name: v1alpha1") && crd.contains("name: v1\n"),
        "{crd}"
    );
    let made = run(&[
        "bundle",
        "--version=0.0.1",
        &format!("--package={project}"),
        "--image=example.com/op:0.0.1",
        "--samples=config/samples",
        "--webhooks=memcached",
    ]);
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let csv = std::fs::read_to_string(dir.path().join(format!(
        "bundle/manifests/{project}.clusterserviceversion.yaml"
    )))
    .expect("the CSV");
    let csv: serde_json::Value = serde_yaml::from_str(&csv).expect("yaml");
    let defs: Vec<(&str, &str)> = csv["spec"]["webhookdefinitions"]
        .as_array()
        .expect("webhookdefinitions")
        .iter()
        .map(|d| {
            (
                d["type"].as_str().expect("type"),
                d["webhookPath"].as_str().expect("path"),
            )
        })
        .collect();
    assert_eq!(
        defs,
        [
            (
                "MutatingAdmissionWebhook",
                "/mutate-cache-example-com-v1alpha1-memcached"
            ),
            (
                "ValidatingAdmissionWebhook",
                "/validate-cache-example-com-v1alpha1-memcached"
            ),
            ("ConversionWebhook", "/convert"),
        ]
    );
    let validated = run(&["bundle", "validate", "bundle"]);
    assert!(
        validated.status.success(),
        "{}",
        String::from_utf8_lossy(&validated.stderr)
    );
    let olmv1 = run(&[
        "bundle",
        "validate",
        "bundle",
        "--select-optional",
        "name=olmv1",
    ]);
    assert_eq!(olmv1.status.code(), Some(1), "OLM v1 refuses the webhooks");
}
