//! `create webhook` and `create api` for a second version in a Rust project: the files, the
//! PROJECT entries as kubebuilder records them, the registration in `src/lib.rs`, the
//! `config/webhook` and `config/certmanager` parts, the refusals (nothing written), and every
//! generated Rust file as rustfmt writes it. That the generated project builds and its
//! webhooks answer the real API server is `webhook_build.rs` (ignored by default: a cargo
//! build of the generated project).
mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use bosun_scaffold::commands::{self, ApiOptions, InitOptions, WebhookOptions};
use bosun_scaffold::project::Project;
use bosun_scaffold::Plugin;
use support::{files, NoDerive};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the workspace")
}

fn init(dir: &Path) {
    commands::init(
        dir,
        Plugin::Rust,
        &InitOptions {
            domain: Some("example.com".into()),
            project_name: Some("shop".into()),
            bosun_source: Some(workspace()),
            ..Default::default()
        },
        &NoDerive::Refuse,
    )
    .expect("init");
}

fn api(dir: &Path, version: &str, kind: &str) -> Result<Vec<String>, bosun_scaffold::Error> {
    commands::create_api(
        dir,
        None,
        &ApiOptions {
            group: Some("cache".into()),
            version: Some(version.into()),
            kind: Some(kind.into()),
            ..Default::default()
        },
        &NoDerive::Refuse,
    )
}

fn hooks(version: &str, kind: &str) -> WebhookOptions {
    WebhookOptions {
        group: Some("cache".into()),
        version: Some(version.into()),
        kind: Some(kind.into()),
        ..Default::default()
    }
}

fn read(dir: &Path, rel: &str) -> String {
    std::fs::read_to_string(dir.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// Every `.rs` file under `dir` is as rustfmt (edition 2021) writes it.
fn assert_rustfmt_clean(dir: &Path) {
    let rs: Vec<String> = files(dir)
        .into_iter()
        .filter(|f| f.ends_with(".rs"))
        .collect();
    let out = Command::new("rustfmt")
        .args(["--check", "--edition", "2021"])
        .args(&rs)
        .current_dir(dir)
        .output()
        .expect("rustfmt runs");
    assert!(
        out.status.success(),
        "not rustfmt-clean:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn defaulting_and_validation_are_scaffolded_served_and_recorded() {
    let dir = tempfile::tempdir().expect("dir");
    init(dir.path());
    api(dir.path(), "v1alpha1", "Memcached").expect("api");
    let out = commands::create_webhook(
        dir.path(),
        &WebhookOptions {
            defaulting: true,
            programmatic_validation: true,
            ..hooks("v1alpha1", "Memcached")
        },
    )
    .expect("create webhook");
    assert!(
        out.last()
            .expect("next")
            .contains("cargo test --test memcached_webhook"),
        "{out:?}"
    );
    let all = files(dir.path());
    for f in [
        "src/memcached/webhook.rs",
        "tests/memcached_webhook.rs",
        "config/webhook/kustomization.yaml",
        "config/webhook/manifests.yaml",
        "config/webhook/service.yaml",
        "config/certmanager/certificate.yaml",
        "config/certmanager/kustomization.yaml",
    ] {
        assert!(all.iter().any(|a| a == f), "{f} missing: {all:?}");
    }

    // The PROJECT entry, in kubebuilder's words and order.
    let project = read(dir.path(), "PROJECT");
    assert!(
        project.contains(
            "  kind: Memcached\n  version: v1alpha1\n  webhooks:\n    defaulting: true\n    validation: true\n    webhookVersion: v1\n"
        ),
        "{project}"
    );
    let p = Project::read(dir.path()).expect("reads back");
    let w = p.resources[0].webhooks.as_ref().expect("webhooks");
    assert!(w.defaulting && w.validation && !w.conversion);

    // Registered through the webhook's operator, built from the environment it is given.
    let lib = read(dir.path(), "src/lib.rs");
    assert!(
        lib.contains("        memcached::webhook::operator(env),\n"),
        "{lib}"
    );
    assert!(
        !lib.contains("Arc::new(memcached::MemcachedOperator)"),
        "{lib}"
    );
    assert!(
        lib.contains(
            "pub fn operators(env: &dyn Fn(&str) -> Option<String>) -> Vec<Arc<dyn Operator>> {"
        ),
        "{lib}"
    );
    let main = read(dir.path(), "src/main.rs");
    assert!(
        main.contains("bosun::main(bosun::Operators::new(operators))"),
        "{main}"
    );
    let module = read(dir.path(), "src/memcached/mod.rs");
    assert!(
        module.contains("pub mod reconcile;\npub mod webhook;\n"),
        "{module}"
    );

    // Handlers at kubebuilder's paths, under the settings prefix `manifests --webhooks` sets.
    let hook = read(dir.path(), "src/memcached/webhook.rs");
    for want in [
        "pub const PREFIX: &str = \"BOSUN_MEMCACHED\";",
        "\"/mutate-cache-example-com-v1alpha1-memcached\"",
        "\"/validate-cache-example-com-v1alpha1-memcached\"",
        "hooks.mutate(DEFAULTING_PATH, default)",
        "hooks.validate(VALIDATING_PATH, validate)",
        "super::plan::check_spec(&obj.spec)",
    ] {
        assert!(hook.contains(want), "{want} not in:\n{hook}");
    }
    assert!(!hook.contains("//@@") && !hook.contains("__"), "{hook}");
    assert!(
        !hook.contains("CONVERSION_PATH"),
        "no conversion asked: {hook}"
    );

    // The kustomize parts: the configurations at the Service, cert-manager's CA injected.
    let manifests = read(dir.path(), "config/webhook/manifests.yaml");
    let docs: Vec<serde_json::Value> = serde_yaml::Deserializer::from_str(&manifests)
        .map(|d| serde::Deserialize::deserialize(d).expect("yaml"))
        .collect();
    let kinds: Vec<&str> = docs
        .iter()
        .map(|d| d["kind"].as_str().expect("kind"))
        .collect();
    assert_eq!(
        kinds,
        [
            "MutatingWebhookConfiguration",
            "ValidatingWebhookConfiguration"
        ]
    );
    for d in &docs {
        assert_eq!(
            d["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
            "shop-system/bosun-memcached"
        );
        let hook = &d["webhooks"][0];
        assert_eq!(hook["clientConfig"]["service"]["name"], "bosun-webhook");
        assert_eq!(hook["clientConfig"]["service"]["port"], 9443);
        assert_eq!(hook["rules"][0]["resources"][0], "memcacheds");
        assert_eq!(hook["sideEffects"], "None");
    }
    let certs = read(dir.path(), "config/certmanager/certificate.yaml");
    assert!(
        certs.contains("kind: Issuer") && certs.contains("secretName: bosun-memcached"),
        "{certs}"
    );
    let makefile = read(dir.path(), "Makefile");
    assert!(makefile.contains("\nWEBHOOKS ?= memcached\n"), "{makefile}");
    assert!(
        makefile
            .contains("--namespace shop-system --webhooks=$(WEBHOOKS) | $(KUBECTL) apply -f -\n"),
        "{makefile}"
    );
    assert_rustfmt_clean(dir.path());

    // A second kind's webhooks: both listed, the environment already passed.
    api(dir.path(), "v1alpha1", "Inventory").expect("second kind");
    commands::create_webhook(
        dir.path(),
        &WebhookOptions {
            programmatic_validation: true,
            ..hooks("v1alpha1", "Inventory")
        },
    )
    .expect("second webhook");
    let lib = read(dir.path(), "src/lib.rs");
    assert!(
        lib.contains("        inventory::webhook::operator(env),\n"),
        "{lib}"
    );
    assert!(
        read(dir.path(), "Makefile").contains("\nWEBHOOKS ?= memcached,inventory\n"),
        "both served"
    );
    let inventory = read(dir.path(), "src/inventory/webhook.rs");
    assert!(!inventory.contains("DEFAULTING_PATH") && inventory.contains("mutating: None,"));
    assert!(
        read(dir.path(), "config/webhook/service.yaml").contains("port: 9444"),
        "a port per operator"
    );
    assert_rustfmt_clean(dir.path());
}

#[test]
fn a_second_version_is_a_spoke_of_the_first_and_conversion_serves_it() {
    let dir = tempfile::tempdir().expect("dir");
    init(dir.path());
    api(dir.path(), "v1alpha1", "Memcached").expect("api");
    let out = api(dir.path(), "v1", "Memcached").expect("a second version");
    assert!(
        out.last()
            .expect("next")
            .contains("--version v1alpha1 --kind Memcached --conversion --spoke v1"),
        "{out:?}"
    );
    let err = api(dir.path(), "v1", "Memcached")
        .expect_err("the same version again")
        .to_string();
    assert!(err.contains("already exists"), "{err}");

    let project = Project::read(dir.path()).expect("PROJECT");
    let versions: Vec<&str> = project
        .resources
        .iter()
        .map(|r| r.version.as_str())
        .collect();
    assert_eq!(versions, ["v1alpha1", "v1"]);
    let spoke = read(dir.path(), "src/memcached/v1.rs");
    assert!(spoke.contains("version = \"v1\""), "{spoke}");
    assert!(spoke.contains("pub fn to_hub(") && spoke.contains("pub fn from_hub("));
    let versions = read(dir.path(), "src/memcached/versions.rs");
    for want in [
        "pub const HUB: &str = \"v1alpha1\";",
        "super::v1::Memcached::crd(),",
        "\"v1\" => decode(version, spec).map(super::v1::to_hub),",
        "\"v1\" => encode(super::v1::from_hub(hub)),",
    ] {
        assert!(versions.contains(want), "{want} not in:\n{versions}");
    }
    let reconcile = read(dir.path(), "src/memcached/reconcile.rs");
    assert!(
        reconcile.contains("vec![super::versions::crd()]"),
        "{reconcile}"
    );
    let module = read(dir.path(), "src/memcached/mod.rs");
    assert!(
        module.contains("pub mod reconcile;\npub mod v1;\npub mod versions;\n"),
        "{module}"
    );
    assert!(files(dir.path())
        .iter()
        .any(|f| f == "config/samples/cache_v1_memcached.yaml"));

    // A third version joins the same hub.
    api(dir.path(), "v2", "Memcached").expect("a third version");
    let versions = read(dir.path(), "src/memcached/versions.rs");
    assert!(
        versions.contains("super::v1::Memcached::crd(),\n        super::v2::Memcached::crd(),"),
        "{versions}"
    );

    // Webhooks go on the hub; --conversion converts between the versions.
    let err = commands::create_webhook(
        dir.path(),
        &WebhookOptions {
            conversion: true,
            ..hooks("v1", "Memcached")
        },
    )
    .expect_err("not the hub")
    .to_string();
    assert!(err.contains("Pass --version v1alpha1"), "{err}");
    let err = commands::create_webhook(
        dir.path(),
        &WebhookOptions {
            conversion: true,
            spoke: vec!["v3".into()],
            ..hooks("v1alpha1", "Memcached")
        },
    )
    .expect_err("no such spoke")
    .to_string();
    assert!(
        err.contains("--spoke v3") && err.contains("v1, v2"),
        "{err}"
    );
    commands::create_webhook(
        dir.path(),
        &WebhookOptions {
            conversion: true,
            defaulting: true,
            ..hooks("v1alpha1", "Memcached")
        },
    )
    .expect("conversion webhook");
    let project = read(dir.path(), "PROJECT");
    assert!(
        project.contains("  webhooks:\n    conversion: true\n    defaulting: true\n    spoke:\n    - v1\n    - v2\n    webhookVersion: v1\n"),
        "{project}"
    );
    let hook = read(dir.path(), "src/memcached/webhook.rs");
    for want in [
        "hooks.convert(CONVERSION_PATH, super::versions::convert)",
        "crds: vec![crd(target, ca)],",
        "\"customresourcedefinitions\",",
        "&[\"memcacheds.cache.example.com\"],",
    ] {
        assert!(hook.contains(want), "{want} not in:\n{hook}");
    }
    let e2e = read(dir.path(), "tests/memcached_webhook.rs");
    assert!(e2e.contains("shop::memcached::v1::Memcached"), "{e2e}");
    assert_rustfmt_clean(dir.path());
}

#[test]
fn refusals_name_the_fix_and_write_nothing() {
    let dir = tempfile::tempdir().expect("dir");
    init(dir.path());
    api(dir.path(), "v1alpha1", "Memcached").expect("api");
    let before = files(dir.path());
    let cases: Vec<(WebhookOptions, &str)> = vec![
        (hooks("v1alpha1", "Memcached"), "pass --defaulting"),
        (
            WebhookOptions {
                defaulting: true,
                ..hooks("v1alpha1", "Other")
            },
            "run `bosun create api --group cache --version v1alpha1 --kind Other` first",
        ),
        (
            WebhookOptions {
                conversion: true,
                ..hooks("v1alpha1", "Memcached")
            },
            "add another with `bosun create api",
        ),
        (
            WebhookOptions {
                defaulting: true,
                spoke: vec!["v1".into()],
                ..hooks("v1alpha1", "Memcached")
            },
            "pass --conversion too",
        ),
        (
            WebhookOptions {
                defaulting: true,
                kind: None,
                ..hooks("v1alpha1", "Memcached")
            },
            "--group, --version and --kind are needed",
        ),
    ];
    for (opts, want) in cases {
        let err = commands::create_webhook(dir.path(), &opts)
            .expect_err(want)
            .to_string();
        assert!(err.contains(want), "{want}: {err}");
    }
    assert_eq!(files(dir.path()), before, "nothing written");

    let validating = WebhookOptions {
        programmatic_validation: true,
        ..hooks("v1alpha1", "Memcached")
    };
    commands::create_webhook(dir.path(), &validating).expect("once");
    let after = files(dir.path());
    let err = commands::create_webhook(dir.path(), &validating)
        .expect_err("twice")
        .to_string();
    assert!(err.contains("has webhooks already"), "{err}");
    assert_eq!(files(dir.path()), after, "nothing written");
}
