//! The one list of operators this binary serves. Every command reads it: `bosun run
//! --operators`, `crd`, `rbac`, `manifests`, `dev`, and the tests' ServiceAccount (through
//! each operator's [`Operator::rbac`]).
use std::sync::Arc;

use bosun_runtime::manager::Operator;

/// Every operator written in code, by name.
pub fn coded() -> Vec<Arc<dyn Operator>> {
    vec![
        Arc::new(bosun_bookstore::BookStoreOperator),
        Arc::new(bosun_myownshell::MyOwnShellOperator),
    ]
}

/// The operators named in `names`, in that order; an unknown name is an error that lists
/// the known ones.
pub fn select(names: &[String]) -> anyhow::Result<Vec<Arc<dyn Operator>>> {
    let all = coded();
    let mut out = Vec::new();
    for n in names.iter().filter(|n| !n.is_empty()) {
        match all.iter().find(|o| o.name() == n) {
            Some(op) if !out.iter().any(|o: &Arc<dyn Operator>| o.name() == n) => {
                out.push(op.clone())
            }
            Some(_) => {}
            None => anyhow::bail!(
                "unknown operator {n:?} (available: {})",
                all.iter()
                    .map(|o| o.name().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_selectable() {
        let names: Vec<String> = coded().iter().map(|o| o.name().to_string()).collect();
        let mut sorted = names.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), names.len(), "operator names are unique");
        let picked = select(&names).expect("every listed operator is selectable");
        assert_eq!(picked.len(), names.len());
        assert_eq!(
            select(&["bookstore".into(), "bookstore".into()])
                .expect("ok")
                .len(),
            1
        );
    }

    #[test]
    fn unknown_names_are_refused_with_the_list() {
        let err = select(&["nope".into()]).err().expect("refused").to_string();
        assert!(
            err.contains("nope") && err.contains("bookstore") && err.contains("myownshell"),
            "{err}"
        );
    }

    #[test]
    fn every_operator_serves_crds_and_needs_no_wildcard() {
        for op in coded() {
            assert!(!op.crds().is_empty(), "{} serves a CRD", op.name());
            let r = op.rbac();
            assert!(
                r.namespaced
                    .iter()
                    .chain(&r.cluster)
                    .all(|r| !bosun_runtime::rbac::has_wildcard(r)),
                "{} asks for a wildcard",
                op.name()
            );
        }
    }
}
