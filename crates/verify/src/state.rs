//! The end state of a scenario: every object of the kinds the operator wrote, in the
//! scenario's namespace, normalised so that two runs of the same spec compare equal when the
//! operator did the same thing: what the API server or another controller assigns (UIDs,
//! versions, times, cluster IPs, bound volumes, `*.kubernetes.io` annotations, other
//! controllers' `status`) is left out, the namespace and UIDs are replaced by names, a
//! `generateName`d object is keyed by its prefix (so a doubled one shows as a count of 2), and
//! a Secret keeps its keys only (an operator may generate passwords).
use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Map, Value};

use crate::proxy::Write;

/// A kind as a collection path: (`/apis/apps/v1` or `/api/v1`, plural).
pub type Collection = (String, String);

/// The collection and name a request path names; None for cluster-wide lists and odd paths.
pub fn collection_of(path: &str) -> Option<(Collection, bool)> {
    let segs: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let (prefix, rest) = match segs.first() {
        Some(&"api") if segs.len() >= 2 => (format!("/api/{}", segs[1]), &segs[2..]),
        Some(&"apis") if segs.len() >= 3 => (format!("/apis/{}/{}", segs[1], segs[2]), &segs[3..]),
        _ => return None,
    };
    let (namespaced, rest) = match rest {
        ["namespaces", _ns, r @ ..] if !r.is_empty() => (true, r),
        r => (false, r),
    };
    let plural = rest.first()?;
    if *plural == "namespaces" || plural.is_empty() {
        return None;
    }
    Some(((prefix, plural.to_string()), namespaced))
}

/// The namespaced kinds the operator wrote (leases and events left out: neither is state).
pub fn kinds_written(writes: &[Write]) -> BTreeSet<Collection> {
    writes
        .iter()
        .filter(|w| w.counts() && w.status < 300)
        .filter_map(|w| collection_of(&w.path))
        .filter(|(c, namespaced)| *namespaced && c.1 != "events")
        .map(|(c, _)| c)
        .collect()
}

/// Normalised objects by key (`plural/name`, or `plural/prefix*`).
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    pub objects: BTreeMap<String, Vec<Value>>,
}

/// Lists `kinds` in `ns` as the admin and normalises them.
pub async fn snapshot(
    admin: &kube::Client,
    ns: &str,
    kinds: &BTreeSet<Collection>,
    custom: &BTreeSet<Collection>,
) -> anyhow::Result<Snapshot> {
    let mut raw = Vec::new();
    for (prefix, plural) in kinds {
        let url = format!("{prefix}/namespaces/{ns}/{plural}");
        let req = http::Request::get(&url).body(Vec::new())?;
        let list: Value = match admin.request(req).await {
            Ok(v) => v,
            // A kind the operator wrote may be gone (a CRD it made itself): nothing to list.
            Err(kube::Error::Api(e)) if e.code == 404 => continue,
            Err(e) => return Err(e.into()),
        };
        // A list's items carry no kind of their own.
        let kind = list["kind"]
            .as_str()
            .and_then(|k| k.strip_suffix("List"))
            .unwrap_or("");
        for item in list["items"].as_array().into_iter().flatten() {
            let is_custom = custom.contains(&(prefix.clone(), plural.clone()));
            let mut item = item.clone();
            if item["kind"].is_null() {
                item["kind"] = json!(kind);
            }
            raw.push((plural.clone(), is_custom, item));
        }
    }
    let uids: BTreeMap<String, String> = raw
        .iter()
        .filter_map(|(plural, _, o)| {
            Some((
                o["metadata"]["uid"].as_str()?.to_string(),
                format!("uid-of:{plural}/{}", o["metadata"]["name"].as_str()?),
            ))
        })
        .collect();
    // A generated name differs from run to run wherever it is quoted (a status naming its
    // child): it reads as its prefix everywhere.
    let generated: Vec<(String, String)> = raw
        .iter()
        .filter_map(|(_, _, o)| {
            let prefix = o["metadata"]["generateName"]
                .as_str()
                .filter(|p| !p.is_empty())?;
            Some((
                o["metadata"]["name"].as_str()?.to_string(),
                format!("{prefix}*"),
            ))
        })
        .collect();
    let mut snap = Snapshot::default();
    for (plural, is_custom, o) in raw {
        let key = match o["metadata"]["generateName"].as_str() {
            Some(prefix) if !prefix.is_empty() => format!("{plural}/{prefix}*"),
            _ => format!("{plural}/{}", o["metadata"]["name"].as_str().unwrap_or("")),
        };
        let mut v = normalise(o, is_custom);
        replace_strings(&mut v, &|s| {
            if looks_like_hash(s) {
                return "<hash>".into();
            }
            let mut s = s.replace(ns, "$NS");
            for (from, to) in uids.iter().chain(generated.iter().map(|(a, b)| (a, b))) {
                if s.contains(from.as_str()) {
                    s = s.replace(from.as_str(), to);
                }
            }
            s
        });
        snap.objects.entry(key).or_default().push(v);
    }
    Ok(snap)
}

fn is_system_key(k: &str) -> bool {
    k.split_once('/')
        .map(|(domain, _)| domain.ends_with("kubernetes.io") || domain.ends_with("k8s.io"))
        .unwrap_or(false)
}

/// An operator's hash of what it applied (to skip an unchanged apply; a release digest)
/// covers UIDs or times, which differ from run to run: the hash differs when the object does
/// not.
fn looks_like_hash(s: &str) -> bool {
    let s = s.strip_prefix("sha256:").unwrap_or(s);
    s.len() >= 16 && s.chars().all(|c| c.is_ascii_hexdigit())
}

/// Seconds since the epoch, 2001 to 2286.
fn looks_like_epoch(s: &str) -> bool {
    s.len() == 10 && s.chars().all(|c| c.is_ascii_digit())
}

fn normalise(mut o: Value, is_custom: bool) -> Value {
    if let Some(meta) = o.get_mut("metadata").and_then(Value::as_object_mut) {
        for k in [
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "generation",
            "managedFields",
            "selfLink",
            "namespace",
            "deletionGracePeriodSeconds",
        ] {
            meta.remove(k);
        }
        if let Some(prefix) = meta.get("generateName").cloned() {
            meta.insert(
                "name".into(),
                json!(format!("{}*", prefix.as_str().unwrap_or(""))),
            );
        }
        if let Some(a) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
            a.retain(|k, _| !is_system_key(k));
            if a.is_empty() {
                meta.remove("annotations");
            }
        }
        // A time in a label (Helm's release records: createdAt, modifiedAt).
        if let Some(l) = meta.get_mut("labels").and_then(Value::as_object_mut) {
            for v in l.values_mut() {
                if v.as_str().is_some_and(looks_like_epoch) {
                    *v = json!("<time>");
                }
            }
        }
        if let Some(refs) = meta
            .get_mut("ownerReferences")
            .and_then(Value::as_array_mut)
        {
            for r in refs.iter_mut() {
                *r = json!({"kind": r["kind"], "name": r["name"], "controller": r["controller"]});
            }
        }
    }
    let obj = o.as_object_mut();
    if let Some(obj) = obj {
        if is_custom {
            if let Some(st) = obj.get_mut("status").and_then(Value::as_object_mut) {
                st.remove("observedGeneration");
                if let Some(cs) = st.get_mut("conditions").and_then(Value::as_array_mut) {
                    for c in cs.iter_mut() {
                        *c = json!({"type": c["type"], "status": c["status"], "reason": c["reason"]});
                    }
                    // Conditions are a map by type: their order is the order they were
                    // first set in, which a restart or a repair changes.
                    cs.sort_by(|a, b| a["type"].as_str().cmp(&b["type"].as_str()));
                }
            }
        } else {
            // Another controller's (a Deployment's replicas ready, a claim's phase).
            obj.remove("status");
        }
        if obj.get("kind").and_then(Value::as_str) == Some("Secret") {
            for field in ["data", "stringData"] {
                if let Some(d) = obj.get_mut(field).and_then(Value::as_object_mut) {
                    for v in d.values_mut() {
                        *v = json!("…");
                    }
                }
            }
        }
        if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
            for k in [
                "clusterIP",
                "clusterIPs",
                "volumeName",
                "healthCheckNodePort",
            ] {
                spec.remove(k);
            }
            for p in spec
                .get_mut("ports")
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                if let Some(p) = p.as_object_mut() {
                    p.remove("nodePort");
                }
            }
        }
    }
    o
}

fn replace_strings(v: &mut Value, f: &dyn Fn(&str) -> String) {
    match v {
        Value::String(s) => *s = f(s),
        Value::Array(a) => a.iter_mut().for_each(|x| replace_strings(x, f)),
        Value::Object(m) => {
            let old = std::mem::take(m);
            *m = old
                .into_iter()
                .map(|(k, mut x)| {
                    replace_strings(&mut x, f);
                    (f(&k), x)
                })
                .collect::<Map<_, _>>();
        }
        _ => {}
    }
}

/// How a run's end state differs from the reference.
#[derive(Debug, Default)]
pub struct Diff {
    /// Keys present in one and not the other, or with another count: the children check.
    pub counts: Vec<String>,
    /// Objects present in both whose content differs: the convergence check.
    pub content: Vec<String>,
}

impl Diff {
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty() && self.content.is_empty()
    }
}

pub fn diff(reference: &Snapshot, run: &Snapshot) -> Diff {
    let mut d = Diff::default();
    let keys: BTreeSet<&String> = reference.objects.keys().chain(run.objects.keys()).collect();
    for k in keys {
        let a = reference.objects.get(k).map(Vec::as_slice).unwrap_or(&[]);
        let b = run.objects.get(k).map(Vec::as_slice).unwrap_or(&[]);
        if a.len() != b.len() {
            match (a.len(), b.len()) {
                // Never made (or never made again): the operator did not converge.
                (n, 0) => d
                    .content
                    .push(format!("{k}: missing ({n} in the reference run)")),
                (0, n) => d
                    .counts
                    .push(format!("{k}: {n} here, none in the reference run")),
                (x, y) if y > x => d
                    .counts
                    .push(format!("{k}: {y} here, {x} in the reference run (doubled)")),
                (x, y) => d
                    .counts
                    .push(format!("{k}: {y} here, {x} in the reference run")),
            }
            continue;
        }
        for (x, y) in a.iter().zip(b) {
            let mut paths = Vec::new();
            value_diff("", x, y, &mut paths);
            if !paths.is_empty() {
                paths.truncate(4);
                d.content.push(format!("{k}: {}", paths.join("; ")));
            }
        }
    }
    d
}

fn short(v: Option<&Value>) -> String {
    match v {
        None => "(absent)".into(),
        Some(v) => {
            let s = v.to_string();
            if s.len() > 60 {
                format!(
                    "{}…",
                    &s[..s.char_indices().nth(60).map(|(i, _)| i).unwrap_or(s.len())]
                )
            } else {
                s
            }
        }
    }
}

fn value_diff(path: &str, a: &Value, b: &Value, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let p = format!("{path}.{k}");
                match (x.get(k), y.get(k)) {
                    (Some(m), Some(n)) => value_diff(&p, m, n, out),
                    (m, n) => out.push(format!(
                        "{p}: {} in the reference, {} here",
                        short(m),
                        short(n)
                    )),
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (m, n)) in x.iter().zip(y).enumerate() {
                value_diff(&format!("{path}[{i}]"), m, n, out);
            }
        }
        _ if a != b => out.push(format!(
            "{}: {} in the reference, {} here",
            if path.is_empty() { "." } else { path },
            short(Some(a)),
            short(Some(b))
        )),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collections_from_paths() {
        assert_eq!(
            collection_of("/apis/apps/v1/namespaces/x/deployments/a"),
            Some((("/apis/apps/v1".into(), "deployments".into()), true))
        );
        assert_eq!(
            collection_of("/api/v1/namespaces/x/configmaps"),
            Some((("/api/v1".into(), "configmaps".into()), true))
        );
        assert_eq!(
            collection_of("/apis/example.com/v1/namespaces/x/widgets/a/status"),
            Some((("/apis/example.com/v1".into(), "widgets".into()), true))
        );
        assert_eq!(collection_of("/api/v1/namespaces/x"), None);
    }

    #[test]
    fn a_doubled_generated_child_is_a_count_and_content_differences_are_paths() {
        let obj = |name: &str, data: &str| json!({"kind": "ConfigMap", "metadata": {"name": name, "generateName": "w-", "uid": name}, "data": {"k": data}});
        let mk = |items: Vec<Value>| Snapshot {
            objects: [(
                "configmaps/w-*".to_string(),
                items.into_iter().map(|o| normalise(o, false)).collect(),
            )]
            .into(),
        };
        let reference = mk(vec![obj("w-abc", "1")]);
        let d = diff(&reference, &mk(vec![obj("w-x", "1"), obj("w-y", "1")]));
        assert_eq!(
            d.counts,
            vec!["configmaps/w-*: 2 here, 1 in the reference run (doubled)"]
        );
        assert!(d.content.is_empty());
        let d = diff(&reference, &mk(vec![obj("w-zz", "2")]));
        assert!(d.counts.is_empty());
        assert_eq!(
            d.content,
            vec!["configmaps/w-*: .data.k: \"1\" in the reference, \"2\" here"]
        );
        assert!(diff(&reference, &mk(vec![obj("w-q", "1")])).is_empty());
        let d = diff(&reference, &Snapshot::default());
        assert_eq!(
            d.content,
            vec!["configmaps/w-*: missing (1 in the reference run)"]
        );
    }

    #[test]
    fn what_the_server_assigns_is_left_out() {
        let svc = |port: i64, hash: &str| {
            normalise(
                json!({"kind": "Service", "metadata": {"name": "s", "uid": "u", "annotations": {"x.dev/applied-hash": hash, "x.dev/keep": "yes"}},
                       "spec": {"clusterIP": "10.0.0.1", "ports": [{"port": 80, "nodePort": port}]}, "status": {"loadBalancer": {}}}),
                false,
            )
        };
        assert_eq!(svc(31000, "h1"), svc(32000, "h1"));
        assert_eq!(
            svc(1, "h1"),
            json!({"kind": "Service", "metadata": {"name": "s", "annotations": {"x.dev/applied-hash": "h1", "x.dev/keep": "yes"}}, "spec": {"ports": [{"port": 80}]}})
        );
        assert!(
            looks_like_hash("be047e217def8beb371fce82")
                && looks_like_hash("sha256:0123456789abcdef")
        );
        assert!(!looks_like_hash("book-store") && !looks_like_hash("12345"));
        assert!(looks_like_epoch("1795865572") && !looks_like_epoch("80"));
        let cr = |conditions: Value| {
            normalise(
                json!({"kind": "BookStore", "metadata": {"name": "b"}, "status": {"conditions": conditions}}),
                true,
            )
        };
        assert_eq!(
            cr(
                json!([{"type": "Running", "status": "True", "reason": "Running"}, {"type": "Successful", "status": "True", "reason": "Ok", "lastTransitionTime": "t1"}])
            ),
            cr(
                json!([{"type": "Successful", "status": "True", "reason": "Ok", "lastTransitionTime": "t2"}, {"type": "Running", "status": "True", "reason": "Running"}])
            )
        );
        let secret = normalise(
            json!({"kind": "Secret", "metadata": {"name": "s", "labels": {"createdAt": "1795865572"}}, "data": {"release": "SDRz"}}),
            false,
        );
        assert_eq!(
            secret,
            json!({"kind": "Secret", "metadata": {"name": "s", "labels": {"createdAt": "<time>"}}, "data": {"release": "…"}})
        );
    }
}
