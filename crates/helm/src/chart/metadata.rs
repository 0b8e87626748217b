//! `Chart.yaml` (and v1 `requirements.yaml`) as Helm's `chart.Metadata`, and the
//! `.Chart` object Helm v4 gives templates (a map keyed by Go field names).
use std::collections::BTreeMap;

use crate::value::{format, Data, ListKind, Map, MapKind, Str, Value};

#[derive(Clone, Debug, Default)]
pub struct Dependency {
    pub name: String,
    pub version: String,
    pub repository: String,
    pub condition: String,
    pub tags: Vec<String>,
    pub enabled: bool,
    pub import_values: Vec<Data>,
    pub alias: String,
}

#[derive(Clone, Debug, Default)]
pub struct Metadata {
    pub api_version: String,
    pub name: String,
    pub version: String,
    pub kube_version: String,
    pub description: String,
    pub chart_type: String,
    pub keywords: Vec<String>,
    pub home: String,
    pub sources: Vec<String>,
    pub dependencies: Vec<Dependency>,
    pub maintainers: Vec<(String, String, String)>,
    pub icon: String,
    pub app_version: String,
    pub deprecated: bool,
    pub annotations: BTreeMap<String, String>,
    pub condition: String,
    pub tags: String,
}

fn text(d: Option<&Data>) -> String {
    match d {
        Some(Data::String(s)) => s.clone(),
        Some(Data::Float(f)) => format::sprint_value(&Value::Float(*f)),
        Some(Data::Int(i)) => i.to_string(),
        Some(Data::Bool(b)) => b.to_string(),
        _ => String::new(),
    }
}

fn texts(d: Option<&Data>) -> Vec<String> {
    match d {
        Some(Data::List(l)) => l.iter().map(|x| text(Some(x))).collect(),
        _ => Vec::new(),
    }
}

impl Metadata {
    /// Reads the fields Helm knows from a parsed `Chart.yaml`.
    pub fn from_data(d: &Data) -> Metadata {
        let m = d.as_map().cloned().unwrap_or_default();
        let g = |k: &str| text(m.get(k));
        let mut md = Metadata {
            api_version: g("apiVersion"),
            name: g("name"),
            version: g("version"),
            kube_version: g("kubeVersion"),
            description: g("description"),
            chart_type: g("type"),
            keywords: texts(m.get("keywords")),
            home: g("home"),
            sources: texts(m.get("sources")),
            icon: g("icon"),
            app_version: g("appVersion"),
            deprecated: matches!(m.get("deprecated"), Some(Data::Bool(true))),
            condition: g("condition"),
            tags: g("tags"),
            ..Default::default()
        };
        if let Some(Data::Map(a)) = m.get("annotations") {
            md.annotations = a.iter().map(|(k, v)| (k.clone(), text(Some(v)))).collect();
        }
        if let Some(Data::List(l)) = m.get("maintainers") {
            md.maintainers = l
                .iter()
                .map(|x| {
                    (
                        text(x.lookup("name")),
                        text(x.lookup("email")),
                        text(x.lookup("url")),
                    )
                })
                .collect();
        }
        md.dependencies = dependencies(m.get("dependencies"));
        md
    }

    pub fn is_library(&self) -> bool {
        self.chart_type.eq_ignore_ascii_case("library")
    }

    /// The `.Chart` object: Helm v4's `MetadataAsMap` plus `IsRoot`.
    pub fn to_value(&self, is_root: bool) -> Value {
        let m = Map::new(MapKind::Iface);
        let put = |k: &str, v: Value| m.insert(Str::from(k), v);
        put("APIVersion", Value::str(&self.api_version));
        let ann = Map::new(MapKind::Str);
        for (k, v) in &self.annotations {
            ann.insert(Str::from(k.as_str()), Value::str(v));
        }
        put("Annotations", Value::Map(ann));
        put("AppVersion", Value::str(&self.app_version));
        put("Condition", Value::str(&self.condition));
        put(
            "Dependencies",
            Value::list(
                ListKind::Iface,
                self.dependencies.iter().map(Dependency::to_value).collect(),
            ),
        );
        put("Deprecated", Value::Bool(self.deprecated));
        put("Description", Value::str(&self.description));
        put("Home", Value::str(&self.home));
        put("Icon", Value::str(&self.icon));
        put("IsRoot", Value::Bool(is_root));
        put(
            "Keywords",
            Value::list(
                ListKind::Iface,
                self.keywords.iter().map(|s| Value::str(s)).collect(),
            ),
        );
        put("KubeVersion", Value::str(&self.kube_version));
        put(
            "Maintainers",
            Value::list(
                ListKind::Iface,
                self.maintainers
                    .iter()
                    .map(|(n, e, u)| {
                        let mm = Map::new(MapKind::Iface);
                        mm.insert("Email".into(), Value::str(e));
                        mm.insert("Name".into(), Value::str(n));
                        mm.insert("URL".into(), Value::str(u));
                        Value::Map(mm)
                    })
                    .collect(),
            ),
        );
        put("Name", Value::str(&self.name));
        put(
            "Sources",
            Value::list(
                ListKind::Iface,
                self.sources.iter().map(|s| Value::str(s)).collect(),
            ),
        );
        put("Tags", Value::str(&self.tags));
        put("Type", Value::str(&self.chart_type));
        put("Version", Value::str(&self.version));
        Value::Map(m)
    }
}

/// Reads a `dependencies:` list.
pub fn dependencies(d: Option<&Data>) -> Vec<Dependency> {
    let Some(Data::List(l)) = d else {
        return Vec::new();
    };
    l.iter()
        .filter(|x| !matches!(x, Data::Null))
        .map(|x| Dependency {
            name: text(x.lookup("name")),
            version: text(x.lookup("version")),
            repository: text(x.lookup("repository")),
            condition: text(x.lookup("condition")),
            tags: texts(x.lookup("tags")),
            enabled: matches!(x.lookup("enabled"), Some(Data::Bool(true))),
            import_values: match x.as_map().and_then(|m| m.get("import-values")) {
                Some(Data::List(v)) => v.clone(),
                _ => Vec::new(),
            },
            alias: text(x.lookup("alias")),
        })
        .collect()
}

impl Dependency {
    fn to_value(&self) -> Value {
        let m = Map::new(MapKind::Iface);
        m.insert("Alias".into(), Value::str(&self.alias));
        m.insert("Condition".into(), Value::str(&self.condition));
        m.insert("Enabled".into(), Value::Bool(self.enabled));
        m.insert(
            "ImportValues".into(),
            Value::list(
                ListKind::Iface,
                self.import_values.iter().map(Data::to_value).collect(),
            ),
        );
        m.insert("Name".into(), Value::str(&self.name));
        m.insert("Repository".into(), Value::str(&self.repository));
        m.insert(
            "Tags".into(),
            Value::list(
                ListKind::Iface,
                self.tags.iter().map(|s| Value::str(s)).collect(),
            ),
        );
        m.insert("Version".into(), Value::str(&self.version));
        Value::Map(m)
    }
}
