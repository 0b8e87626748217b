//! The optional suite (`--select-optional suite=operatorframework`): OperatorHub's listing
//! fields (capabilities and categories included), good practices, and APIs removed from
//! Kubernetes.
use serde_json::Value;

use super::{semver, str_of, At, Bundle, Finding, Options};

const CAPABILITIES: [&str; 5] = [
    "Basic Install",
    "Seamless Upgrades",
    "Full Lifecycle",
    "Deep Insights",
    "Auto Pilot",
];

/// operator-framework's standard categories (replaced by `Options::categories`).
const CATEGORIES: [&str; 16] = [
    "AI/Machine Learning",
    "Application Runtime",
    "Big Data",
    "Cloud Provider",
    "Database",
    "Developer Tools",
    "Integration & Delivery",
    "Logging & Tracing",
    "Modernization & Migration",
    "Monitoring",
    "Networking",
    "Observability",
    "OpenShift Optional",
    "Security",
    "Storage",
    "Streaming & Messaging",
];

const ICON_TYPES: [&str; 4] = ["image/svg+xml", "image/png", "image/jpeg", "image/gif"];

/// `(apiVersion, kind or "" for any, removed in 1.minor)`.
const REMOVED: [(&str, &str, u64); 12] = [
    (
        "apiextensions.k8s.io/v1beta1",
        "CustomResourceDefinition",
        22,
    ),
    ("apiregistration.k8s.io/v1beta1", "", 22),
    ("rbac.authorization.k8s.io/v1beta1", "", 22),
    ("admissionregistration.k8s.io/v1beta1", "", 22),
    ("scheduling.k8s.io/v1beta1", "", 22),
    ("extensions/v1beta1", "", 22),
    ("batch/v1beta1", "CronJob", 25),
    ("policy/v1beta1", "", 25),
    ("discovery.k8s.io/v1beta1", "", 25),
    ("autoscaling/v2beta1", "", 25),
    ("autoscaling/v2beta2", "", 26),
    ("flowcontrol.apiserver.k8s.io/v1beta2", "", 29),
];

pub fn run(b: &Bundle, opts: &Options, out: &mut Vec<Finding>) {
    if let Some(csv) = b.csv() {
        if opts.operatorhub {
            operatorhub(&csv.file, &csv.object, opts, out);
        }
        if opts.good_practices {
            practices(b, &csv.file, &csv.object, out);
        }
    }
    if opts.deprecated_apis {
        deprecated(b, opts, out);
    }
}

/// operatorhubv2's rules: the provider named; maintainers, links and keywords may be empty,
/// but each one listed is whole.
fn operatorhub(file: &str, csv: &Value, opts: &Options, out: &mut Vec<Finding>) {
    let mut at = At {
        out,
        check: "operatorhub",
        file,
    };
    let spec = &csv["spec"];
    if str_of(spec, &["provider", "name"]).trim().is_empty() {
        at.error("spec.provider.name", "is required for OperatorHub");
    }
    if let Some(m) = spec["maintainers"].as_array() {
        for (i, m) in m.iter().enumerate() {
            let (name, email) = (str_of(m, &["name"]), str_of(m, &["email"]));
            if name.is_empty() || email.is_empty() {
                at.error(
                    &format!("spec.maintainers[{i}]"),
                    "needs both name and email",
                );
            } else if !email_ok(email) {
                at.error(
                    &format!("spec.maintainers[{i}].email"),
                    format!("{email:?} is not an email address"),
                );
            }
        }
    }
    if let Some(l) = spec["links"].as_array() {
        for (i, l) in l.iter().enumerate() {
            let (name, url) = (str_of(l, &["name"]), str_of(l, &["url"]));
            if name.is_empty() || url.is_empty() {
                at.error(&format!("spec.links[{i}]"), "needs both name and url");
            } else if !url_ok(url) {
                at.error(
                    &format!("spec.links[{i}].url"),
                    format!("{url:?} is not an http(s) URL"),
                );
            }
        }
    }
    if let Some(k) = spec["keywords"].as_array() {
        for (i, k) in k.iter().enumerate() {
            if k.as_str().unwrap_or_default().trim().is_empty() {
                at.error(&format!("spec.keywords[{i}]"), "must not be empty");
            }
        }
    }
    match spec["icon"].as_array() {
        Some(icons) if !icons.is_empty() => {
            if icons.len() > 1 {
                at.error("spec.icon", "OperatorHub shows one icon: keep one element");
            }
            for (i, icon) in icons.iter().enumerate() {
                let mt = str_of(icon, &["mediatype"]);
                if str_of(icon, &["base64data"]).is_empty() {
                    at.error(&format!("spec.icon[{i}].base64data"), "is required");
                }
                if !ICON_TYPES.contains(&mt) {
                    at.error(
                        &format!("spec.icon[{i}].mediatype"),
                        format!("{mt:?} is not one of {ICON_TYPES:?}"),
                    );
                }
            }
        }
        _ => at.warn("spec.icon", "no icon: OperatorHub shows a default one"),
    }
    let ann = &csv["metadata"]["annotations"];
    match ann["capabilities"].as_str() {
        None => at.error(
            "metadata.annotations.capabilities",
            format!("is required: one of {CAPABILITIES:?}"),
        ),
        Some(c) if !CAPABILITIES.contains(&c) => at.error(
            "metadata.annotations.capabilities",
            format!("{c:?} is not one of {CAPABILITIES:?}"),
        ),
        Some(_) => {}
    }
    if let Some(cats) = ann["categories"].as_str() {
        let allowed: Vec<&str> = match &opts.categories {
            Some(custom) => custom.iter().map(String::as_str).collect(),
            None => CATEGORIES.to_vec(),
        };
        for c in cats.split(',').map(str::trim) {
            if !allowed.contains(&c) {
                at.error(
                    "metadata.annotations.categories",
                    format!("{c:?} is not an OperatorHub category ({allowed:?})"),
                );
            }
        }
    }
    // Not set: the default CSV check warns already.
    match spec["minKubeVersion"].as_str() {
        None | Some("") => {}
        Some(v) if semver(v).is_none() => at.error(
            "spec.minKubeVersion",
            format!("{v:?} is not a semantic version (e.g. 1.25.0)"),
        ),
        Some(_) => {}
    }
}

fn email_ok(e: &str) -> bool {
    let Some((user, domain)) = e.split_once('@') else {
        return false;
    };
    !user.is_empty()
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && !e.contains(char::is_whitespace)
}

fn url_ok(u: &str) -> bool {
    let rest = u
        .strip_prefix("https://")
        .or_else(|| u.strip_prefix("http://"));
    rest.is_some_and(|r| {
        let host = r.split('/').next().unwrap_or_default();
        !host.is_empty() && !r.contains(char::is_whitespace)
    })
}

fn practices(b: &Bundle, file: &str, csv: &Value, out: &mut Vec<Finding>) {
    let mut at = At {
        out,
        check: "good-practices",
        file,
    };
    let deployments = csv["spec"]["install"]["spec"]["deployments"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for (i, d) in deployments.iter().enumerate() {
        let containers = d["spec"]["template"]["spec"]["containers"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for (j, c) in containers.iter().enumerate() {
            if c["resources"]["requests"].is_null() {
                at.warn(
                    &format!(
                        "spec.install.spec.deployments[{i}].spec.template.spec.containers[{j}].resources.requests"
                    ),
                    "no resource requests: the scheduler cannot place the operator reliably",
                );
            }
        }
    }
    let owned = csv["spec"]["customresourcedefinitions"]["owned"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for (i, o) in owned.iter().enumerate() {
        if str_of(o, &["description"]).trim().is_empty() {
            at.warn(
                &format!("spec.customresourcedefinitions.owned[{i}].description"),
                "an owned CRD without a description",
            );
        }
        if str_of(o, &["displayName"]).trim().is_empty() {
            at.warn(
                &format!("spec.customresourcedefinitions.owned[{i}].displayName"),
                "an owned CRD without a display name",
            );
        }
    }
    // OLM orders a package's CSVs by the version in the name, and OperatorHub lists them so.
    let name = str_of(csv, &["metadata", "name"]);
    let conventional = name
        .split_once(".v")
        .is_some_and(|(op, v)| !op.is_empty() && semver(v).is_some());
    if !name.is_empty() && !conventional {
        at.warn(
            "metadata.name",
            format!(
                "{name:?} does not follow the convention <operator-name>.v<semver> (e.g. \
                 memcached-operator.v0.0.1)"
            ),
        );
    }
    if let Some(a) = &b.annotations {
        let channels = str_of(
            &a["annotations"],
            &["operators.operatorframework.io.bundle.channels.v1"],
        );
        for c in channels.split(',').map(str::trim).filter(|c| !c.is_empty()) {
            let ok = ["alpha", "beta", "stable", "fast", "candidate", "preview"]
                .iter()
                .any(|p| c == *p || c.starts_with(&format!("{p}-")));
            if !ok {
                let mut at = At {
                    out: &mut *at.out,
                    check: "good-practices",
                    file: "metadata/annotations.yaml",
                };
                at.warn(
                    "annotations.operators.operatorframework.io.bundle.channels.v1",
                    format!("channel {c:?} does not follow the naming convention (stable, fast, candidate, optionally -<version>)"),
                );
            }
        }
    }
}

fn deprecated(b: &Bundle, opts: &Options, out: &mut Vec<Finding>) {
    // Without --optional-values k8s-version, the CSV's minKubeVersion decides what must run.
    let target = opts.k8s_version.or_else(|| {
        b.csv()
            .and_then(|c| semver(str_of(&c.object, &["spec", "minKubeVersion"])))
            .map(|(a, b, _)| (a, b))
    });
    for m in &b.manifests {
        let api = str_of(&m.object, &["apiVersion"]);
        let kind = str_of(&m.object, &["kind"]);
        for (gv, k, minor) in REMOVED {
            if api != gv || !(k.is_empty() || k == kind) {
                continue;
            }
            let mut at = At {
                out: &mut *out,
                check: "alpha-deprecated-apis",
                file: &m.file,
            };
            let msg =
                format!("{kind} {api} was removed in Kubernetes 1.{minor}: use its GA version");
            match target {
                Some((1, t)) if t >= minor => at.error("apiVersion", msg),
                _ => at.warn("apiVersion", msg),
            }
        }
    }
    // Permissions on removed APIs in the CSV itself.
    if let Some(csv) = b.csv() {
        for p in ["permissions", "clusterPermissions"] {
            for (i, perm) in csv.object["spec"]["install"]["spec"][p]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
            {
                for (j, rule) in perm["rules"].as_array().into_iter().flatten().enumerate() {
                    let groups: Vec<&str> = rule["apiGroups"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                        .collect();
                    if groups.contains(&"extensions") {
                        let mut at = At {
                            out: &mut *out,
                            check: "alpha-deprecated-apis",
                            file: &csv.file,
                        };
                        at.warn(
                            &format!("spec.install.spec.{p}[{i}].rules[{j}].apiGroups"),
                            "the extensions group's APIs were removed in Kubernetes 1.22",
                        );
                    }
                }
            }
        }
    }
}
