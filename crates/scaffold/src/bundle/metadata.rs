//! The bundle's metadata: `annotations.yaml` and `bundle.Dockerfile` carry the same labels
//! (OLM reads the image's labels, `opm` the file), and the scorecard configuration naming the
//! built-in tests.
use super::BundleInput;

fn labels(input: &BundleInput) -> Vec<(String, String)> {
    let default = input
        .default_channel
        .clone()
        .or_else(|| input.channels.first().cloned())
        .unwrap_or_else(|| "alpha".into());
    let channels = if input.channels.is_empty() {
        default.clone()
    } else {
        input.channels.join(",")
    };
    let p = "operators.operatorframework.io";
    vec![
        (format!("{p}.bundle.mediatype.v1"), "registry+v1".into()),
        (format!("{p}.bundle.manifests.v1"), "manifests/".into()),
        (format!("{p}.bundle.metadata.v1"), "metadata/".into()),
        (format!("{p}.bundle.package.v1"), input.package.clone()),
        (format!("{p}.bundle.channels.v1"), channels),
        (format!("{p}.bundle.channel.default.v1"), default),
        (format!("{p}.metrics.builder"), input.builder.clone()),
        (format!("{p}.metrics.mediatype.v1"), "metrics+v1".into()),
        (
            format!("{p}.metrics.project_layout"),
            input.project_layout.clone(),
        ),
        (format!("{p}.test.mediatype.v1"), "scorecard+v1".into()),
        (format!("{p}.test.config.v1"), "tests/scorecard/".into()),
    ]
}

pub fn annotations(input: &BundleInput) -> String {
    let mut s = String::from("annotations:\n");
    for (k, v) in labels(input) {
        s.push_str(&format!("  {k}: {v}\n"));
    }
    s
}

pub fn dockerfile(input: &BundleInput) -> String {
    let mut s = String::from("FROM scratch\n\n");
    for (k, v) in labels(input) {
        s.push_str(&format!("LABEL {k}={v}\n"));
    }
    s.push_str(
        "\nCOPY bundle/manifests /manifests/\nCOPY bundle/metadata /metadata/\nCOPY bundle/tests/scorecard /tests/scorecard/\n",
    );
    s
}

/// The built-in tests: operator-sdk's entrypoints and image (those of the project's
/// config/scorecard), so `operator-sdk scorecard` runs them in a cluster and `bosun scorecard`
/// runs the same six in-process, selected by the same labels.
pub const SCORECARD_TESTS: [(&str, &str); 6] = [
    ("basic", "basic-check-spec"),
    ("olm", "olm-bundle-validation"),
    ("olm", "olm-crds-have-validation"),
    ("olm", "olm-crds-have-resources"),
    ("olm", "olm-spec-descriptors"),
    ("olm", "olm-status-descriptors"),
];

pub const SCORECARD_IMAGE: &str = "quay.io/operator-framework/scorecard-test:v1.42.0";

pub fn scorecard() -> String {
    let mut s = String::from(
        "apiVersion: scorecard.operatorframework.io/v1alpha3\nkind: Configuration\nmetadata:\n  name: config\nstages:\n- parallel: true\n  tests:\n",
    );
    for (suite, test) in SCORECARD_TESTS {
        s.push_str(&format!(
            "  - entrypoint:\n    - scorecard-test\n    - {test}\n    image: {SCORECARD_IMAGE}\n    labels:\n      suite: {suite}\n      test: {test}-test\n"
        ));
    }
    s
}
