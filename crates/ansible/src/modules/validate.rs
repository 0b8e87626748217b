//! Load-time checks of module arguments whose values are static.
use super::Module;
use crate::template::scan::is_possibly_template;
use crate::yaml::{Node, NodeExt};

fn one_of<'a>(
    args: &'a [(String, Node)],
    name: &str,
    allowed: &[&str],
    what: &str,
) -> Result<(), (Option<&'a Node>, String)> {
    if let Some((_, v)) = args.iter().find(|(k, _)| k == name) {
        if let Some(s) = v.as_str() {
            if !is_possibly_template(s) && !allowed.contains(&s) {
                return Err((
                    Some(v),
                    format!(
                        "{what}: '{s}' is not supported by bosun (supported: {})",
                        allowed.join(", ")
                    ),
                ));
            }
        }
    }
    Ok(())
}

pub fn static_args(module: Module, args: &[(String, Node)]) -> Result<(), (Option<&Node>, String)> {
    match module {
        Module::K8s => {
            one_of(args, "state", &["present", "absent"], "k8s state")?;
            if let Some((_, v)) = args.iter().find(|(k, _)| k == "merge_type") {
                let items: Vec<&str> = match v.as_seq() {
                    Some(s) => s.iter().filter_map(NodeExt::as_str).collect(),
                    None => v.as_str().into_iter().collect(),
                };
                if let Some(bad) = items.iter().find(|m| {
                    !is_possibly_template(m) && !["json", "merge", "strategic-merge"].contains(m)
                }) {
                    return Err((
                        Some(v),
                        format!(
                            "k8s merge_type '{bad}' is not one of json, merge, strategic-merge"
                        ),
                    ));
                }
            }
            let has = |n: &str| args.iter().any(|(k, _)| k == n);
            if has("template") && (has("definition") || has("resource_definition") || has("src")) {
                return Err((
                    None,
                    "k8s: template cannot be combined with definition or src".into(),
                ));
            }
        }
        Module::K8sEvent => one_of(args, "state", &["present"], "k8s_event state")?,
        Module::Assert if !args.iter().any(|(k, _)| k == "that") => {
            return Err((None, "assert needs 'that'".into()));
        }
        Module::RequeueAfter if !args.iter().any(|(k, _)| k == "time") => {
            return Err((None, "requeue_after needs 'time'".into()));
        }
        Module::K8sStatus => {
            for need in ["kind", "name"] {
                if !args.iter().any(|(k, _)| k == need) {
                    return Err((None, format!("k8s_status needs '{need}'")));
                }
            }
        }
        _ => {}
    }
    Ok(())
}
