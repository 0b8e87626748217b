//! What `helm template` prints: manifests split into documents
//! (`releaseutil.SplitManifests`), hooks (`helm.sh/hook`) set apart, both sorted by
//! kind in Helm's install order (stable, unknown kinds last and alphabetical), each
//! printed as `---\n# Source: <path>\n<document>\n`, hooks after the manifests.
use super::{RenderError, RenderErrorKind, Rendered};
use crate::value::Data;

/// Helm's `InstallOrder`.
pub const INSTALL_ORDER: &[&str] = &[
    "PriorityClass",
    "Namespace",
    "NetworkPolicy",
    "ResourceQuota",
    "LimitRange",
    "PodSecurityPolicy",
    "PodDisruptionBudget",
    "ServiceAccount",
    "Secret",
    "SecretList",
    "ConfigMap",
    "StorageClass",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "CustomResourceDefinition",
    "ClusterRole",
    "ClusterRoleList",
    "ClusterRoleBinding",
    "ClusterRoleBindingList",
    "Role",
    "RoleList",
    "RoleBinding",
    "RoleBindingList",
    "Service",
    "DaemonSet",
    "Pod",
    "ReplicationController",
    "ReplicaSet",
    "Deployment",
    "HorizontalPodAutoscaler",
    "StatefulSet",
    "Job",
    "CronJob",
    "IngressClass",
    "Ingress",
    "APIService",
];

/// One YAML document of a rendered template.
#[derive(Debug, Clone)]
pub struct Manifest {
    /// The template path (`chart/templates/x.yaml`).
    pub path: String,
    pub content: String,
    pub api_version: String,
    pub kind: String,
    pub name: String,
    /// The `helm.sh/hook` annotation, for hooks.
    pub hook: Option<String>,
}

/// Helm v4.2's document separator (`releaseutil.SplitManifests`): `---` at the start of
/// the text or of a line, with the whitespace before and after it — newlines included,
/// and whatever follows on the same line is the next document's start (`---# c`,
/// `---apiVersion: v1`). `\s` is Go's RE2 class, ASCII `[\t\n\f\r ]`.
pub const SEPARATOR: &str = r"(?:^|[\t\n\x0C\r ]*\n)---[\t\n\x0C\r ]*";

fn separator() -> &'static regex::Regex {
    static RE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    #[allow(clippy::expect_used)]
    RE.get_or_init(|| regex::Regex::new(SEPARATOR).expect("the separator pattern is valid"))
}

/// `releaseutil.SplitManifests` of Helm v4.2: the documents of a rendered template in
/// order. The text is left-trimmed, split on [`SEPARATOR`], blank pieces dropped and each
/// document left-trimmed; trailing whitespace stays (only on the last one, since the
/// separator takes what precedes it).
pub fn split_documents(text: &str) -> Vec<String> {
    separator()
        .split(text.trim_start())
        .filter(|d| !d.trim().is_empty())
        .map(|d| d.trim_start().to_string())
        .collect()
}

fn kind_rank(kind: &str) -> Option<usize> {
    INSTALL_ORDER.iter().position(|k| *k == kind)
}

/// Stable sort by kind, as Helm's `sortManifestsByKind`.
pub fn sort_by_kind(m: &mut [Manifest]) {
    m.sort_by(|a, b| match (kind_rank(&a.kind), kind_rank(&b.kind)) {
        (Some(x), Some(y)) => x.cmp(&y),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => a.kind.cmp(&b.kind),
    });
}

fn text(d: Option<&Data>) -> String {
    d.and_then(Data::as_str).unwrap_or("").to_string()
}

/// Splits every rendered manifest (not NOTES, not partials) into documents, in Helm's
/// order; returns (manifests, hooks).
pub fn sort_manifests(r: &Rendered) -> Result<(Vec<Manifest>, Vec<Manifest>), RenderError> {
    let mut generic = Vec::new();
    let mut hooks = Vec::new();
    for (path, content) in r.manifests() {
        if content.trim().is_empty() {
            continue;
        }
        for doc in split_documents(content) {
            let head = crate::funcs::helm::yaml_data(&doc).map_err(|e| RenderError {
                kind: RenderErrorKind::Exec,
                message: format!("YAML parse error on {path}: {e}"),
            })?;
            let hook = head
                .lookup("metadata")
                .and_then(|m| m.as_map())
                .and_then(|m| m.get("annotations"))
                .and_then(Data::as_map)
                .and_then(|a| a.get("helm.sh/hook"))
                .map(|h| text(Some(h)));
            let m = Manifest {
                path: path.clone(),
                content: doc,
                api_version: text(head.lookup("apiVersion")),
                kind: text(head.lookup("kind")),
                name: text(
                    head.as_map()
                        .and_then(|m| m.get("metadata"))
                        .and_then(|m| m.as_map())
                        .and_then(|m| m.get("name")),
                ),
                hook: hook.clone(),
            };
            match hook {
                Some(_) => hooks.push(m),
                None => generic.push(m),
            }
        }
    }
    sort_by_kind(&mut generic);
    sort_by_kind(&mut hooks);
    Ok((generic, hooks))
}

/// The text `helm template` prints for a render.
pub fn helm_template_output(r: &Rendered, include_crds: bool) -> Result<String, RenderError> {
    let (manifests, hooks) = sort_manifests(r)?;
    let mut body = String::new();
    if include_crds {
        for (path, content) in &r.crds {
            body.push_str(&format!("---\n# Source: {path}\n{content}\n"));
        }
    }
    for m in &manifests {
        body.push_str(&format!("---\n# Source: {}\n{}\n", m.path, m.content));
    }
    let mut out = format!("{}\n", body.trim());
    if body.trim().is_empty() {
        out = "\n".to_string();
    }
    for h in &hooks {
        out.push_str(&format!("---\n# Source: {}\n{}\n", h.path, h.content));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_documents() {
        let docs = split_documents("---\na: 1\n---\n\n# c\n---\nb: 2\n");
        assert_eq!(docs, vec!["a: 1", "# c", "b: 2\n"]);
    }

    /// Helm v4.2's separator is `(?:^|\s*\n)---\s*` on the left-trimmed text: a `---` at
    /// the start of a line splits whatever follows it on that line, and the whitespace
    /// around it (newlines included) goes with the separator.
    #[test]
    fn splits_as_helms_separator_regex() {
        let cases: &[(&str, &[&str])] = &[
            // A comment right after the separator stays in the next document.
            ("---# comment\na: 1\n", &["# comment\na: 1\n"]),
            ("a: 1\n--- # c\nb: 2", &["a: 1", "# c\nb: 2"]),
            // Text on the separator's line starts the next document.
            ("a: 1\n---b: 2\n", &["a: 1", "b: 2\n"]),
            ("a: 1\n----\nb: 2", &["a: 1", "-\nb: 2"]),
            // Trailing spaces, CRLF, blank lines and indentation go with the separator.
            ("a: 1  \n  \n---   \n\n  b: 2  \n", &["a: 1", "b: 2  \n"]),
            ("a: 1\r\n---\r\nb: 2\r\n", &["a: 1", "b: 2\r\n"]),
            // Leading whitespace and separators, empty documents.
            ("\n\n  ---\na: 1", &["a: 1"]),
            ("  \n---\n \n", &[]),
            ("a: 1\n---\n---\n", &["a: 1", "---\n"]),
            // A separator's trailing whitespace takes the newline the next one needs:
            // Helm keeps that `---` as a document's first line.
            ("---\na: 1\n---\n\n---\nb: 2\n", &["a: 1", "---\nb: 2\n"]),
            ("---\n---\n\n---   \n", &["---"]),
            ("", &[]),
            // Not a separator: indented, or not at a line start.
            (
                "a: |\n  ---\n  x\nb: c---d",
                &["a: |\n  ---\n  x\nb: c---d"],
            ),
            // `--` is not a separator; a lone `---` at the very end is.
            ("a: 1\n--\nb: 2\n---", &["a: 1\n--\nb: 2"]),
            // Form feed and tab are whitespace to the separator; vertical tab is not (but
            // the left trim of each document removes it).
            ("a: 1\t\x0c\n---\t\x0cb: 2", &["a: 1", "b: 2"]),
            ("a: 1\x0b\n---\x0bb: 2", &["a: 1\x0b", "b: 2"]),
        ];
        for (text, want) in cases {
            assert_eq!(&split_documents(text), want, "splitting {text:?}");
        }
    }
}
