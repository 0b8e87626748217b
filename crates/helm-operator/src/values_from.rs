//! `valuesFrom` (bosun's watches.yaml extension, in Flux `HelmRelease`'s shape): values read
//! from Secrets and ConfigMaps in the custom resource's namespace.
//!
//! Precedence, lowest first: the chart's values.yaml, each `valuesFrom` source in list order
//! (a later one wins), the custom resource's spec, the entry's `overrideValues`. Maps merge
//! key by key, anything else is replaced — Flux's merge of `valuesFrom` under `values`.
//!
//! Each source's key holds a YAML map of values, read as Helm reads a values file (numbers
//! are float64). A source that is missing, or whose key is, is an error naming it unless the
//! source is `optional` (then it gives no values); a change of a source re-reconciles the
//! custom resources of its namespace ([`crate::HelmFlavor`]'s `triggers`).
//!
//! Secrets' values are never shown: errors about a Secret name it and the key, never a line
//! of it, and every string a Secret gave is masked (`****`) in whatever error the release then
//! reports (a schema refusal or a `fail` quoting a value), which is what reaches the status,
//! the Events and the log ([`Sourced::mask`]).
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use bosun_helm::value::Data;
use bosun_runtime::controller::Trigger;
use bosun_watches::{ValuesFrom, ValuesSourceKind};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::Api;
use kube::core::PartialObjectMeta;
use kube::core::{ApiResource, DynamicObject};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::ResourceExt;

/// Strings shorter than this are not masked: masking `a` or `on` in a message would garble it
/// and hides nothing.
const MASK_MIN: usize = 4;

/// Why a source gave no values.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("valuesFrom: {kind} {namespace}/{name} not found; create it or mark the source optional: true")]
    Missing {
        kind: &'static str,
        namespace: String,
        name: String,
    },
    #[error("valuesFrom: {kind} {namespace}/{name} has no key {key:?}; add it, set valuesKey, or mark the source optional: true")]
    NoKey {
        kind: &'static str,
        namespace: String,
        name: String,
        key: String,
    },
    /// The message never quotes the content (it may be a Secret's).
    #[error("valuesFrom: {kind} {namespace}/{name} key {key:?} is not {what}")]
    NotValues {
        kind: &'static str,
        namespace: String,
        name: String,
        key: String,
        what: &'static str,
    },
    #[error("valuesFrom: reading {kind} {namespace}/{name}: {error}")]
    Read {
        kind: &'static str,
        namespace: String,
        name: String,
        error: kube::Error,
    },
}

impl SourceError {
    /// Whether reading again may succeed without a change (the API server's fault).
    pub fn is_transient(&self) -> bool {
        matches!(self, SourceError::Read { .. })
    }
}

/// The values of an entry's sources for one namespace, and what to mask.
#[derive(Debug, Default)]
pub struct Sourced {
    pub values: BTreeMap<String, Data>,
    /// Every string a Secret gave, longest first.
    secrets: Vec<String>,
}

impl Sourced {
    /// `text` with every string a Secret gave replaced by `****`.
    pub fn mask(&self, text: &str) -> String {
        let mut out = text.to_string();
        for s in &self.secrets {
            if out.contains(s.as_str()) {
                out = out.replace(s.as_str(), "****");
            }
        }
        out
    }

    /// Whether `text` holds a string a Secret gave.
    pub fn reveals(&self, text: &str) -> bool {
        self.secrets.iter().any(|s| text.contains(s.as_str()))
    }

    /// The values with `spec` merged over them (the spec wins).
    pub fn under(&self, spec: Data) -> Data {
        if self.values.is_empty() {
            return spec;
        }
        match spec {
            Data::Map(m) => {
                let mut base = self.values.clone();
                merge(&mut base, m);
                Data::Map(base)
            }
            other => other,
        }
    }
}

/// Maps merge key by key, anything else in `over` replaces what `base` had.
pub fn merge(base: &mut BTreeMap<String, Data>, over: BTreeMap<String, Data>) {
    for (k, v) in over {
        match (base.get_mut(&k), v) {
            (Some(Data::Map(b)), Data::Map(o)) => merge(b, o),
            (_, v) => {
                base.insert(k, v);
            }
        }
    }
}

/// One source's key as values: a YAML map (an empty text or `null` is no values).
pub fn parse(text: &str) -> Result<BTreeMap<String, Data>, &'static str> {
    match bosun_helm::funcs::helm::yaml_data(text) {
        Ok(Data::Map(m)) => Ok(m),
        Ok(Data::Null) => Ok(BTreeMap::new()),
        Ok(_) => Err("a YAML map of values"),
        Err(_) => Err("YAML"),
    }
}

/// Reads `sources` in `namespace` (one GET each) and merges them in order.
pub async fn read(
    client: &kube::Client,
    namespace: &str,
    sources: &[ValuesFrom],
) -> Result<Sourced, SourceError> {
    let mut out = Sourced::default();
    for src in sources {
        let kind = src.kind.as_str();
        let err_ctx = |error: kube::Error| SourceError::Read {
            kind,
            namespace: namespace.to_string(),
            name: src.name.clone(),
            error,
        };
        let data: Option<Option<String>> = match src.kind {
            ValuesSourceKind::Secret => {
                let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
                api.get_opt(&src.name).await.map_err(err_ctx)?.map(|s| {
                    let from_data = s
                        .data
                        .as_ref()
                        .and_then(|d| d.get(&src.values_key))
                        .map(|b| String::from_utf8_lossy(&b.0).into_owned());
                    from_data.or_else(|| {
                        s.string_data
                            .as_ref()
                            .and_then(|d| d.get(&src.values_key).cloned())
                    })
                })
            }
            ValuesSourceKind::ConfigMap => {
                let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
                api.get_opt(&src.name)
                    .await
                    .map_err(err_ctx)?
                    .map(|c| c.data.and_then(|mut d| d.remove(&src.values_key)))
            }
        };
        let text = match data {
            Some(Some(t)) => t,
            None if src.optional => continue,
            Some(None) if src.optional => continue,
            None => {
                return Err(SourceError::Missing {
                    kind,
                    namespace: namespace.to_string(),
                    name: src.name.clone(),
                })
            }
            Some(None) => {
                return Err(SourceError::NoKey {
                    kind,
                    namespace: namespace.to_string(),
                    name: src.name.clone(),
                    key: src.values_key.clone(),
                })
            }
        };
        let values = parse(&text).map_err(|what| SourceError::NotValues {
            kind,
            namespace: namespace.to_string(),
            name: src.name.clone(),
            key: src.values_key.clone(),
            what,
        })?;
        if src.kind == ValuesSourceKind::Secret {
            collect_strings(&Data::Map(values.clone()), &mut out.secrets);
        }
        merge(&mut out.values, values);
    }
    out.secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    out.secrets.dedup();
    Ok(out)
}

/// One watch per source (`metadata.name=<name>`, metadata only: a Secret's data never
/// enters this process but through the reconcile's GET), in `ns` (all when None); each
/// change of a source triggers the custom resources that read it: those of its namespace.
pub fn triggers(
    client: &kube::Client,
    sources: &[ValuesFrom],
    ns: Option<&str>,
    resource: &ApiResource,
    primaries: Store<DynamicObject>,
) -> Vec<Trigger<DynamicObject>> {
    let distinct: BTreeSet<(ValuesSourceKind, &str)> =
        sources.iter().map(|s| (s.kind, s.name.as_str())).collect();
    distinct
        .into_iter()
        .map(|(kind, name)| {
            let cfg = watcher::Config::default().fields(&format!("metadata.name={name}"));
            let namespaces = match kind {
                ValuesSourceKind::Secret => {
                    namespaces_of(watcher(scoped::<PartialObjectMeta<Secret>>(client, ns), cfg))
                }
                ValuesSourceKind::ConfigMap => namespaces_of(watcher(
                    scoped::<PartialObjectMeta<ConfigMap>>(client, ns),
                    cfg,
                )),
            };
            let (store, ar, what) = (primaries.clone(), resource.clone(), format!("{} {name}", kind.as_str()));
            namespaces
                .filter_map(move |r| {
                    futures::future::ready(match r {
                        Ok(ns) => Some(ns),
                        Err(e) => {
                            tracing::warn!(source = %what, error = %e, "valuesFrom watch error (retrying with backoff)");
                            None
                        }
                    })
                })
                .flat_map(move |ns| {
                    futures::stream::iter(referencing(&store.state(), &ar, &ns).into_iter().map(request))
                })
                .boxed()
        })
        .collect()
}

/// A reconcile request as the runtime's triggers carry it: a source's change is a user's
/// change, so it goes ahead of re-lists in the queue.
fn request(r: ObjectRef<DynamicObject>) -> <Trigger<DynamicObject> as futures::Stream>::Item {
    (r, bosun_runtime::controller::Origin::Event)
}

fn scoped<K>(client: &kube::Client, ns: Option<&str>) -> Api<K>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    K::DynamicType: Default,
{
    match ns {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// The namespace of every source object that changed (appeared, was edited, went).
fn namespaces_of<K>(
    events: impl futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
) -> futures::stream::BoxStream<'static, Result<String, watcher::Error>>
where
    K: kube::Resource + Send + 'static,
{
    events
        .default_backoff()
        .filter_map(|e| {
            futures::future::ready(match e {
                Ok(
                    watcher::Event::Apply(o)
                    | watcher::Event::Delete(o)
                    | watcher::Event::InitApply(o),
                ) => Some(Ok(o.namespace().unwrap_or_default())),
                Ok(_) => None,
                Err(e) => Some(Err(e)),
            })
        })
        .boxed()
}

/// The custom resources a change of a source in `namespace` concerns: every one in that
/// namespace (the entry's sources are read from each custom resource's own namespace), none
/// elsewhere.
pub fn referencing(
    primaries: &[Arc<DynamicObject>],
    resource: &ApiResource,
    namespace: &str,
) -> Vec<ObjectRef<DynamicObject>> {
    primaries
        .iter()
        .filter(|o| o.namespace().as_deref() == Some(namespace))
        .map(|o| ObjectRef::from_obj_with(o.as_ref(), resource.clone()))
        .collect()
}

/// Every string leaf (and the printed form of numbers, which a message may quote) of `d`.
fn collect_strings(d: &Data, out: &mut Vec<String>) {
    match d {
        Data::String(s) if s.chars().count() >= MASK_MIN => out.push(s.clone()),
        Data::Int(i) if i.to_string().len() >= MASK_MIN => out.push(i.to_string()),
        Data::Float(f) if f.fract() == 0.0 && f.abs() < 1e15 && f.abs() >= 1000.0 => {
            out.push(format!("{}", *f as i64))
        }
        Data::List(l) => l.iter().for_each(|x| collect_strings(x, out)),
        Data::Map(m) => m.values().for_each(|x| collect_strings(x, out)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(yaml: &str) -> BTreeMap<String, Data> {
        parse(yaml).expect("values")
    }

    #[test]
    fn sources_merge_in_order_and_the_spec_wins() {
        let mut from = Sourced::default();
        merge(
            &mut from.values,
            map("db:\n  host: a\n  port: 5432\nlist: [1, 2]\nonlyFirst: x\n"),
        );
        merge(&mut from.values, map("db:\n  host: b\nlist: [3]\n"));
        assert_eq!(from.values["onlyFirst"], Data::String("x".into()));
        assert_eq!(
            from.values["list"],
            Data::List(vec![Data::Float(3.0)]),
            "lists are replaced, numbers read as Helm reads a values file"
        );
        let spec = crate::values::from_spec(Some(&serde_json::json!({"db": {"port": 6432}})))
            .expect("spec");
        let v = from.under(spec);
        assert_eq!(v.lookup("db.host").and_then(Data::as_str), Some("b"));
        assert_eq!(v.lookup("db.port"), Some(&Data::Int(6432)), "the spec wins");
    }

    #[test]
    fn only_a_map_of_values_is_values_and_the_error_never_quotes_it() {
        assert!(parse("").expect("empty").is_empty());
        assert!(parse("~").expect("null").is_empty());
        assert_eq!(parse("- s3cr3t-value"), Err("a YAML map of values"));
        assert_eq!(parse("a: [s3cr3t-value"), Err("YAML"));
        let e = SourceError::NotValues {
            kind: "Secret",
            namespace: "ns".into(),
            name: "creds".into(),
            key: "values.yaml".into(),
            what: "YAML",
        };
        assert_eq!(
            e.to_string(),
            "valuesFrom: Secret ns/creds key \"values.yaml\" is not YAML"
        );
    }

    #[test]
    fn a_source_change_concerns_the_custom_resources_of_its_namespace_only() {
        let ar = ApiResource::from_gvk(&kube::core::GroupVersionKind::gvk(
            "test.bosun.dev",
            "v1",
            "Sourced",
        ));
        let cr = |ns: &str, name: &str| Arc::new(DynamicObject::new(name, &ar).within(ns));
        let all = [cr("a", "one"), cr("b", "two"), cr("a", "three")];
        let names: Vec<(String, Option<String>)> = referencing(&all, &ar, "a")
            .into_iter()
            .map(|r| (r.name, r.namespace))
            .collect();
        assert_eq!(
            names,
            [
                ("one".to_string(), Some("a".to_string())),
                ("three".to_string(), Some("a".to_string()))
            ]
        );
        assert!(referencing(&all, &ar, "c").is_empty());
    }

    #[test]
    fn secret_strings_are_masked_longest_first() {
        let mut s = Sourced::default();
        collect_strings(
            &Data::Map(map(
                "password: hunter22\nprefix: hunter\npin: 12345\nflag: on\n",
            )),
            &mut s.secrets,
        );
        s.secrets.sort_by_key(|x| std::cmp::Reverse(x.len()));
        let msg = "at '/password': 'hunter22' is too long; pin 12345 on";
        assert!(s.reveals(msg));
        assert_eq!(
            s.mask(msg),
            "at '/password': '****' is too long; pin **** on"
        );
    }
}
