//! What differs between two manifests of a release, said without a single value: the objects
//! (kind, namespace, name) that were added, removed or changed. Any line of a manifest may be
//! a Secret's, so a log that shows lines shows secrets (review H1).
use std::collections::BTreeMap;

use bosun_helm::render::manifest::split_documents;

/// How many objects of each sort are named before "and N more".
const SHOWN: usize = 5;

/// "changed: Secret ns/a; added: ConfigMap ns/b; removed: ..." (only the sorts that occur).
pub fn describe(rendered: &str, recorded: &str) -> String {
    let now = objects(rendered);
    let before = objects(recorded);
    let mut changed = Vec::new();
    let mut added = Vec::new();
    for (k, doc) in &now {
        match before.get(k) {
            None => added.push(k.as_str()),
            Some(old) if old != doc => changed.push(k.as_str()),
            Some(_) => {}
        }
    }
    let removed: Vec<&str> = before
        .keys()
        .filter(|k| !now.contains_key(*k))
        .map(String::as_str)
        .collect();
    let mut parts = Vec::new();
    for (what, list) in [("changed", changed), ("added", added), ("removed", removed)] {
        if list.is_empty() {
            continue;
        }
        let mut s = format!("{what}: {}", list[..list.len().min(SHOWN)].join(", "));
        if list.len() > SHOWN {
            s.push_str(&format!(" and {} more", list.len() - SHOWN));
        }
        parts.push(s);
    }
    if parts.is_empty() {
        "the same objects, laid out differently".into()
    } else {
        parts.join("; ")
    }
}

/// The documents of a manifest by the object they describe (a document that is not an
/// object is named by its position).
fn objects(manifest: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (i, doc) in split_documents(manifest).into_iter().enumerate() {
        let key = bosun_yaml::goyaml::yaml_to_json(&doc)
            .ok()
            .and_then(|j| serde_json::from_str::<serde_json::Value>(&j).ok())
            .and_then(|v| {
                let kind = v.get("kind")?.as_str()?.to_string();
                let meta = v.get("metadata")?;
                let name = meta.get("name")?.as_str()?;
                Some(match meta.get("namespace").and_then(|n| n.as_str()) {
                    Some(ns) => format!("{kind} {ns}/{name}"),
                    None => format!("{kind} {name}"),
                })
            })
            .unwrap_or_else(|| format!("document {}", i + 1));
        // Comments (the `# Source:` lines) are not part of the object.
        let body: Vec<&str> = doc
            .lines()
            .filter(|l| !l.trim_start().starts_with('#'))
            .collect();
        out.insert(key, body.join("\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "---\n# Source: c/templates/secret.yaml\napiVersion: v1\nkind: Secret\nmetadata:\n  name: auth\ndata:\n  password: b2xkLXNlY3JldA==\nstringData:\n  token: plain-old-token\n";

    #[test]
    fn a_changed_secret_is_named_and_none_of_its_values_shown() {
        let new = SECRET
            .replace("b2xkLXNlY3JldA==", "bmV3LXNlY3JldA==")
            .replace("plain-old-token", "plain-new-token");
        let cm = "---\n# Source: c/templates/cm.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n  namespace: ns\ndata:\n  a: b\n";
        let said = describe(&format!("{new}{cm}"), SECRET);
        assert_eq!(said, "changed: Secret auth; added: ConfigMap ns/cm");
        for v in ["b2xk", "bmV3", "plain-", "password", "token"] {
            assert!(!said.contains(v), "{said}");
        }
        assert_eq!(
            describe(SECRET, &format!("{SECRET}{cm}")),
            "removed: ConfigMap ns/cm"
        );
    }

    #[test]
    fn layout_only_and_unparseable_documents_say_nothing_of_their_content() {
        let moved = SECRET.replace("# Source: c/templates/secret.yaml", "# Source: other.yaml");
        assert_eq!(
            describe(&moved, SECRET),
            "the same objects, laid out differently"
        );
        let said = describe("---\nnot: [valid\n", "---\nkey: s3cret-value\n");
        assert!(!said.contains("s3cret"), "{said}");
        assert_eq!(said, "changed: document 1");
    }

    #[test]
    fn long_lists_are_cut() {
        let many: String = (0..8)
            .map(|i| format!("---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c{i}\n"))
            .collect();
        assert_eq!(
            describe(&many, ""),
            "added: ConfigMap c0, ConfigMap c1, ConfigMap c2, ConfigMap c3, ConfigMap c4 and 3 more"
        );
    }
}
