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

/// `releaseutil.SplitManifests`: documents in order, trimmed, empty ones dropped.
pub fn split_documents(text: &str) -> Vec<String> {
    let t = text.trim();
    let mut docs = Vec::new();
    let mut cur = String::new();
    let mut first = true;
    for line in t.split('\n') {
        let is_sep = line.starts_with("---") && line[3..].trim().is_empty();
        if is_sep {
            if !(first && cur.is_empty()) {
                docs.push(std::mem::take(&mut cur));
            }
            first = false;
            continue;
        }
        first = false;
        if !cur.is_empty() {
            cur.push('\n');
        }
        cur.push_str(line);
    }
    docs.push(cur);
    docs.into_iter()
        .map(|d| d.trim().to_string())
        .filter(|d| !d.is_empty())
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
        let docs = split_documents("---\na: 1\n---\n\n---\nb: 2\n");
        assert_eq!(docs, vec!["a: 1", "b: 2"]);
    }
}
