//! What a chart can render under any values, read from its templates' text (review M12): the
//! RBAC of a default-values render misses every kind a value turns on (the `helm create`
//! scaffold's Ingress, HorizontalPodAutoscaler and PodDisruptionBudget), which then fails
//! with 403 at run time.
//!
//! A document's kind is a `kind:` line at column 0 with a literal value; its group comes from
//! the document's literal `apiVersion:`, else from the table of built-in kinds (charts compute
//! `apiVersion` for Ingress and friends from `.Capabilities`). Kinds computed by a template
//! cannot be known offline: they are reported, as are Roles whose rules come from values.
use std::collections::BTreeSet;

use bosun_helm::chart::load::ChartNode;

/// What the scan found.
#[derive(Debug, Default, PartialEq)]
pub struct Scan {
    /// (group, kind) of every document with a literal kind.
    pub kinds: BTreeSet<(String, String)>,
    /// Things a person must look at, each naming the template.
    pub warnings: Vec<String>,
}

/// Scans the chart's templates and its subcharts'.
pub fn scan(node: &ChartNode) -> Scan {
    let mut out = Scan::default();
    scan_into(node, &node.meta.name, &mut out);
    out
}

fn scan_into(node: &ChartNode, chart: &str, out: &mut Scan) {
    for (path, text) in &node.templates {
        scan_template(&format!("{chart}/{path}"), text, out);
    }
    for dep in &node.deps {
        scan_into(dep, &format!("{chart}/charts/{}", dep.meta.name), out);
    }
}

/// One document's facts, as read so far.
#[derive(Default)]
struct Doc {
    api_version: Option<String>,
    kind: Option<String>,
    templated_kind: bool,
    templated_rules: bool,
}

fn scan_template(path: &str, text: &str, out: &mut Scan) {
    let mut doc = Doc::default();
    let mut in_rules = false;
    for line in text.lines() {
        if line.starts_with("---") {
            finish(path, std::mem::take(&mut doc), out);
            in_rules = false;
            continue;
        }
        if let Some(v) = line.strip_prefix("apiVersion:") {
            let v = v.trim().trim_matches(['"', '\'']);
            if !v.is_empty() && !v.contains("{{") {
                doc.api_version = Some(v.to_string());
            }
        } else if let Some(v) = line.strip_prefix("kind:") {
            let v = v.trim().trim_matches(['"', '\'']);
            if v.contains("{{") {
                doc.templated_kind = true;
            } else if !v.is_empty() && v.chars().all(|c| c.is_ascii_alphanumeric()) {
                doc.kind = Some(v.to_string());
            }
        } else if line.starts_with("rules:") {
            in_rules = true;
            if line.contains("{{") {
                doc.templated_rules = true;
            }
            continue;
        }
        if in_rules {
            if !line.starts_with([' ', '-', '{']) && !line.trim().is_empty() {
                in_rules = false;
            } else if line.contains("{{") && line.contains(".Values") {
                doc.templated_rules = true;
            }
        }
    }
    finish(path, doc, out);
}

fn finish(path: &str, doc: Doc, out: &mut Scan) {
    if doc.templated_kind && doc.kind.is_none() {
        out.warnings.push(format!(
            "{path}: a document's kind is computed by the template; grant its RBAC by hand"
        ));
    }
    let Some(kind) = doc.kind else { return };
    let group = match &doc.api_version {
        Some(av) => av.rsplit_once('/').map_or("", |(g, _)| g).to_string(),
        None => match bosun_watches::kinds::builtin_group(&kind) {
            Some(g) => g.to_string(),
            None => {
                out.warnings.push(format!(
                    "{path}: {kind}'s apiVersion is computed by the template and it is no \
                     built-in kind; grant its RBAC by hand"
                ));
                return;
            }
        },
    };
    if doc.templated_rules && (kind == "Role" || kind == "ClusterRole") {
        out.warnings.push(format!(
            "{path}: the {kind}'s rules come from values: the operator holds the rules the \
             default values render, so a custom resource asking for more gets 403 (grant \
             those permissions to the operator by hand to allow them)"
        ));
    }
    out.kinds.insert((group, kind));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scanned(text: &str) -> Scan {
        let mut out = Scan::default();
        scan_template("c/templates/t.yaml", text, &mut out);
        out
    }

    #[test]
    fn kinds_behind_any_condition_are_found_with_their_group() {
        let s = scanned(
            r#"{{- if .Values.ingress.enabled -}}
apiVersion: {{ include "c.ingress.apiVersion" . }}
kind: Ingress
metadata:
  name: x
spec:
  rules:
  - host: a
{{- end }}
---
{{- if .Values.autoscaling.enabled }}
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
spec:
  scaleTargetRef:
    kind: Deployment
{{- end }}
---
apiVersion: monitoring.coreos.com/v1
kind: "ServiceMonitor"
"#,
        );
        let kinds: Vec<(&str, &str)> = s
            .kinds
            .iter()
            .map(|(g, k)| (g.as_str(), k.as_str()))
            .collect();
        assert_eq!(
            kinds,
            [
                ("autoscaling", "HorizontalPodAutoscaler"),
                ("monitoring.coreos.com", "ServiceMonitor"),
                ("networking.k8s.io", "Ingress"),
            ],
            "an indented kind (scaleTargetRef) is no document's"
        );
        assert!(s.warnings.is_empty(), "{:?}", s.warnings);
    }

    #[test]
    fn computed_kinds_and_rules_from_values_are_reported() {
        let s = scanned(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: r\nrules:\n{{- toYaml .Values.rbac.extraRules | nindent 0 }}\n---\napiVersion: v1\nkind: {{ .Values.kind }}\n---\napiVersion: {{ .Values.av }}\nkind: Gizmo\n",
        );
        assert!(s
            .kinds
            .contains(&("rbac.authorization.k8s.io".into(), "ClusterRole".into())));
        assert_eq!(s.warnings.len(), 3, "{:?}", s.warnings);
        assert!(s.warnings[0].contains("rules come from values"));
        assert!(s.warnings[1].contains("kind is computed"));
        assert!(s.warnings[2].contains("Gizmo"));
        let fixed = scanned("apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nrules:\n- apiGroups: [\"\"]\n  resources: [pods]\n  verbs: [get]\n");
        assert!(fixed.warnings.is_empty(), "{:?}", fixed.warnings);
    }
}
