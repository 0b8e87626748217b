//! `bosun create webhook` and `bosun create api` for a second version, through the binary, in a
//! Rust project: kubebuilder's flags reach the scaffold (the files and the PROJECT entry are
//! `bosun-scaffold`'s tests; that the result builds and answers the API server is its
//! `webhook_build`), and a Helm project is refused with the reason.
mod support;

use support::{ok, repo, run};

#[test]
fn create_webhook_takes_kubebuilders_flags() {
    let tmp = tempfile::tempdir().expect("tmp");
    let dir = tmp.path();
    let source = repo().canonicalize().expect("the checkout");
    ok(
        dir,
        &[
            "init",
            "--plugins=rust",
            "--domain=example.com",
            "--project-name=shop",
            "--bosun-source",
            source.to_str().expect("utf8"),
        ],
    );
    let gvk = ["--group=cache", "--kind=Memcached"];
    ok(
        dir,
        &[&["create", "api", "--version=v1alpha1"][..], &gvk].concat(),
    );
    let out = ok(
        dir,
        &[&["create", "api", "--version=v1"][..], &gvk].concat(),
    );
    assert!(out.contains("src/memcached/v1.rs"), "{out}");
    let out = ok(
        dir,
        &[
            &["create", "webhook", "--version=v1alpha1"][..],
            &gvk,
            &[
                "--defaulting",
                "--programmatic-validation",
                "--conversion",
                "--spoke=v1",
            ],
        ]
        .concat(),
    );
    assert!(out.contains("src/memcached/webhook.rs"), "{out}");
    let project = std::fs::read_to_string(dir.join("PROJECT")).expect("PROJECT");
    assert!(
        project.contains("    conversion: true\n    defaulting: true\n    spoke:\n    - v1\n    validation: true\n    webhookVersion: v1\n"),
        "{project}"
    );

    let again = run(
        dir,
        &[
            &["create", "webhook", "--version=v1alpha1", "--defaulting"][..],
            &gvk,
        ]
        .concat(),
    );
    assert!(!again.status.success());
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(err.contains("has webhooks already"), "{err}");
}

#[test]
fn a_helm_project_has_no_code_to_add_webhooks_to() {
    let tmp = tempfile::tempdir().expect("tmp");
    let dir = tmp.path();
    ok(
        dir,
        &[
            "init",
            "--plugins=helm",
            "--domain=example.com",
            "--project-name=charts",
        ],
    );
    let out = run(
        dir,
        &[
            "create",
            "webhook",
            "--group=x",
            "--version=v1",
            "--kind=Y",
            "--defaulting",
        ],
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("`create webhook` scaffolds code")
            && err.contains("helm.sdk.operatorframework.io/v1"),
        "{err}"
    );
}
