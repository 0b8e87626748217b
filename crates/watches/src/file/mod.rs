//! `watches.yaml` as operator-sdk's helm-operator and ansible-operator read it: a list of
//! entries, each a kind (`group`, `version`, `kind`) and what runs it — a Helm `chart`, an
//! Ansible `role` or a `playbook` — with the options of that flavour.
//!
//! Differences from operator-sdk, on purpose:
//! * a bad file names the entry and the field (`watches.yaml:7: entry 2 (BookStore): chart:
//!   ...`); operator-sdk reports the first Go unmarshalling error;
//! * unknown keys, and keys of the other flavour, are warned about (operator-sdk silently
//!   ignores them, so a typo like `overideValues` changes nothing without a word);
//! * relative paths (`chart`, `playbook`) are resolved against the watches file's directory
//!   first, then the working directory: operator-sdk's images run from the watches file's
//!   directory (`/opt/helm`, `/opt/ansible`), so both read the same files there, and bosun
//!   also works from anywhere else.
//!
//! Environment expansion: `${VAR}` anywhere in the file is replaced by a set variable and
//! left as written when unset (ansible-operator's `os.Expand`); `overrideValues` then go
//! through `$VAR`/`${VAR}` expansion with unset variables empty (helm-operator's
//! `os.ExpandEnv`).
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bosun_yaml::{Mark, Node, Schema, Yaml};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use kube::core::GroupVersionKind;

/// An error in a watches file: where, which entry, which field, what.
#[derive(Debug, thiserror::Error)]
#[error("{file}:{line}: {entry}{field}{message}")]
pub struct WatchesError {
    pub file: String,
    pub line: usize,
    /// `entry N (Kind): ` or empty for the file as a whole.
    pub entry: String,
    /// `field: ` or empty.
    pub field: String,
    pub message: String,
}

/// A warning about a watches file (a key operator-sdk would silently ignore).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Warning(pub String);

/// What runs an entry's objects.
#[derive(Clone, Debug, PartialEq)]
pub enum Runner {
    /// A Helm chart directory (or `.tgz`).
    Chart(PathBuf),
    /// An Ansible role: a name, an FQCN (`ns.collection.role`) or a path, resolved by the
    /// Ansible flavour like ansible-operator does.
    Role(String),
    /// An Ansible playbook file.
    Playbook(PathBuf),
}

/// The finalizer of an Ansible entry.
#[derive(Clone, Debug, PartialEq)]
pub struct Finalizer {
    pub name: String,
    /// None: the entry's own role or playbook runs, with `vars`.
    pub runner: Option<Runner>,
    pub vars: serde_json::Map<String, serde_json::Value>,
}

/// Options of an Ansible entry (ansible-operator's defaults).
#[derive(Clone, Debug, PartialEq)]
pub struct AnsibleOptions {
    pub vars: serde_json::Map<String, serde_json::Value>,
    pub finalizer: Option<Finalizer>,
    pub manage_status: bool,
    pub watch_cluster_scoped_resources: bool,
    pub snake_case_parameters: bool,
    pub watch_annotations_changes: bool,
    pub mark_unsafe: bool,
    pub blacklist: Vec<GroupVersionKind>,
    pub max_runner_artifacts: u32,
}

impl Default for AnsibleOptions {
    fn default() -> Self {
        AnsibleOptions {
            vars: Default::default(),
            finalizer: None,
            manage_status: true,
            watch_cluster_scoped_resources: false,
            snake_case_parameters: true,
            watch_annotations_changes: false,
            mark_unsafe: false,
            blacklist: Vec::new(),
            max_runner_artifacts: 20,
        }
    }
}

/// One entry of a watches file.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// 1-based position in the file, and the line it starts on.
    pub index: usize,
    pub line: usize,
    pub gvk: GroupVersionKind,
    pub runner: Runner,
    pub watch_dependent_resources: bool,
    pub selector: Option<LabelSelector>,
    pub reconcile_period: Option<Duration>,
    pub max_concurrent_reconciles: Option<u16>,
    /// Helm: values that win over the spec, after environment expansion (`a.b=c` paths).
    pub override_values: BTreeMap<String, String>,
    /// Helm: operator-sdk's `dryRunOption` — `server` makes the chart's `lookup` read the
    /// cluster; `none` or `client` (the default) keep it empty, as `helm template` does.
    pub dry_run_server: bool,
    /// Helm (bosun's extension, not operator-sdk's): the chart's `crds/` are server-side
    /// applied on every install and upgrade, not only created once (`upgradeCRDs: true`).
    pub upgrade_crds: bool,
    /// Helm (bosun's extension, Flux's `HelmRelease.spec.valuesFrom` shape): Secrets and
    /// ConfigMaps in the custom resource's namespace whose values go under its spec.
    pub values_from: Vec<ValuesFrom>,
    /// Ansible: everything else.
    pub ansible: AnsibleOptions,
}

/// One `valuesFrom` source of a Helm entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValuesFrom {
    pub kind: ValuesSourceKind,
    pub name: String,
    /// The key holding a YAML map of values (Flux's `valuesKey`, default `values.yaml`).
    pub values_key: String,
    /// A missing object or key is then no values rather than an error.
    pub optional: bool,
}

/// What a `valuesFrom` source is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ValuesSourceKind {
    Secret,
    ConfigMap,
}

impl ValuesSourceKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ValuesSourceKind::Secret => "Secret",
            ValuesSourceKind::ConfigMap => "ConfigMap",
        }
    }
}

impl Entry {
    /// How the entry is named in messages: `BookStore.charts.example.com/v1alpha1`.
    pub fn describe(&self) -> String {
        describe(&self.gvk)
    }

    /// The label selector as a watch's `labelSelector` string, or None when it selects all.
    pub fn selector_string(&self) -> Option<String> {
        self.selector.as_ref().and_then(selector_string)
    }
}

fn describe(gvk: &GroupVersionKind) -> String {
    if gvk.group.is_empty() {
        format!("{}/{}", gvk.kind, gvk.version)
    } else {
        format!("{}.{}/{}", gvk.kind, gvk.group, gvk.version)
    }
}

/// A parsed watches file.
#[derive(Clone, Debug)]
pub struct WatchesFile {
    pub path: PathBuf,
    pub entries: Vec<Entry>,
    pub warnings: Vec<Warning>,
}

impl WatchesFile {
    /// Reads and checks `path` with the process environment.
    pub fn load(path: &Path) -> Result<WatchesFile, WatchesError> {
        let text = std::fs::read_to_string(path).map_err(|e| WatchesError {
            file: path.display().to_string(),
            line: 0,
            entry: String::new(),
            field: String::new(),
            message: format!("cannot read: {e}"),
        })?;
        Self::parse(path, &text, &|k| std::env::var(k).ok())
    }

    /// Checks `text` as the contents of `path`, reading variables through `env`.
    ///
    /// Variables as each operator reads them (review L4): ansible-operator expands `${VAR}`
    /// in the whole text before reading it (a set variable may even add YAML); helm-operator
    /// reads the file, then expands each `overrideValues` value once, so a value never
    /// changes the YAML (`yes` stays a string, `a # b` is not a comment, an empty variable
    /// is an empty value). A file holding both kinds of entry reads each as its operator does
    /// when the file is YAML before the expansion too (`${VAR}` inside a flow mapping is not:
    /// then every entry reads the expanded text).
    pub fn parse(
        path: &Path,
        text: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<WatchesFile, WatchesError> {
        let expanded = expand_braced(text, env);
        Self::parse_text(path, text, &expanded, env)
    }

    fn parse_text(
        path: &Path,
        text: &str,
        expanded: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<WatchesFile, WatchesError> {
        let file = path.display().to_string();
        let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let err = |line: usize, message: String| WatchesError {
            file: file.clone(),
            line,
            entry: String::new(),
            field: String::new(),
            message,
        };
        let docs = bosun_yaml::load_all(expanded, Schema::GoYamlV2)
            .map_err(|e| err(0, format!("not YAML: {e}")))?;
        // The file as written, for chart entries (when the expansion changed anything and
        // the file reads without it, entry for entry).
        let plain_docs = (expanded != text)
            .then(|| bosun_yaml::load_all(text, Schema::GoYamlV2).ok())
            .flatten();
        let plain_items: Option<&Vec<Node>> = match plain_docs.as_deref() {
            Some([one]) => match &one.value {
                Yaml::Seq(items) => Some(items),
                _ => None,
            },
            _ => None,
        };
        let root = match docs.as_slice() {
            [] => return Err(err(1, "empty: a watches file is a list of entries".into())),
            [one] => one,
            [_, second, ..] => {
                return Err(err(
                    second.mark.line,
                    "a watches file is one YAML document (a list of entries)".into(),
                ))
            }
        };
        let Yaml::Seq(items) = &root.value else {
            return Err(err(root.mark.line, "expected a list of entries".into()));
        };
        let mut entries: Vec<Entry> = Vec::new();
        let mut warnings = Vec::new();
        let plain_items = plain_items.filter(|p| p.len() == items.len());
        for (i, item) in items.iter().enumerate() {
            let item = match plain_items.map(|p| &p[i]) {
                Some(p) if is_chart_item(p) => p,
                _ => item,
            };
            let ctx = EntryCtx {
                file: &file,
                base: &base,
                index: i + 1,
                mark: item.mark,
                kind: String::new(),
            };
            let entry = parse_entry(ctx, item, env, &mut warnings)?;
            if let Some(prev) = entries.iter().find(|e| e.gvk == entry.gvk) {
                return Err(WatchesError {
                    file: file.clone(),
                    line: entry.line,
                    entry: format!("entry {} ({}): ", entry.index, entry.gvk.kind),
                    field: String::new(),
                    message: format!(
                        "duplicate GVK {}: entry {} watches it already",
                        entry.describe(),
                        prev.index
                    ),
                });
            }
            entries.push(entry);
        }
        if entries.is_empty() {
            return Err(err(root.mark.line, "no entries".into()));
        }
        Ok(WatchesFile {
            path: path.to_path_buf(),
            entries,
            warnings,
        })
    }
}

struct EntryCtx<'a> {
    file: &'a str,
    base: &'a Path,
    index: usize,
    mark: Mark,
    kind: String,
}

impl EntryCtx<'_> {
    fn err(&self, mark: Mark, field: &str, message: impl Into<String>) -> WatchesError {
        WatchesError {
            file: self.file.to_string(),
            line: if mark.line > 0 {
                mark.line
            } else {
                self.mark.line
            },
            entry: if self.kind.is_empty() {
                format!("entry {}: ", self.index)
            } else {
                format!("entry {} ({}): ", self.index, self.kind)
            },
            field: if field.is_empty() {
                String::new()
            } else {
                format!("{field}: ")
            },
            message: message.into(),
        }
    }

    fn warn(&self, mark: Mark, message: String) -> Warning {
        Warning(format!(
            "{}:{}: entry {} ({}): {message}",
            self.file, mark.line, self.index, self.kind
        ))
    }

    /// A path relative to the watches file's directory when it exists there, else as given
    /// (relative to the working directory).
    fn path(&self, p: &str) -> PathBuf {
        let given = PathBuf::from(p);
        if given.is_absolute() {
            return given;
        }
        let beside = self.base.join(&given);
        if beside.exists() {
            beside
        } else {
            given
        }
    }
}

const COMMON: &[&str] = &[
    "group",
    "version",
    "kind",
    "watchDependentResources",
    "selector",
    "reconcilePeriod",
    "maxConcurrentReconciles",
];
const HELM: &[&str] = &[
    "chart",
    "overrideValues",
    "dryRunOption",
    "upgradeCRDs",
    "valuesFrom",
];
const ANSIBLE: &[&str] = &[
    "role",
    "playbook",
    "vars",
    "finalizer",
    "manageStatus",
    "watchClusterScopedResources",
    "snakeCaseParameters",
    "watchAnnotationsChanges",
    "markUnsafe",
    "blacklist",
    "maxRunnerArtifacts",
];

/// A Helm entry (it names a chart): read as written, its overrides expanded afterwards.
fn is_chart_item(item: &Node) -> bool {
    match &item.value {
        Yaml::Map(pairs) => pairs
            .iter()
            .any(|(k, _)| scalar_text(&k.value).as_deref() == Some("chart")),
        _ => false,
    }
}

fn parse_entry(
    mut cx: EntryCtx<'_>,
    item: &Node,
    env: &dyn Fn(&str) -> Option<String>,
    warnings: &mut Vec<Warning>,
) -> Result<Entry, WatchesError> {
    let Yaml::Map(pairs) = &item.value else {
        return Err(cx.err(
            item.mark,
            "",
            "expected a mapping (group, version, kind, ...)",
        ));
    };
    let mut fields: BTreeMap<String, &Node> = BTreeMap::new();
    for (k, v) in pairs {
        match &k.value {
            Yaml::Str(s) => {
                fields.insert(s.clone(), v);
            }
            other => return Err(cx.err(k.mark, "", format!("keys are strings, not {other:?}"))),
        }
    }
    let string = |cx: &EntryCtx, name: &str| -> Result<Option<String>, WatchesError> {
        match fields.get(name) {
            None => Ok(None),
            Some(n) => match &n.value {
                Yaml::Str(s) => Ok(Some(s.clone())),
                Yaml::Null => Ok(None),
                _ => Err(cx.err(n.mark, name, "expected a string")),
            },
        }
    };
    let boolean = |cx: &EntryCtx, name: &str, default: bool| -> Result<bool, WatchesError> {
        match fields.get(name) {
            None => Ok(default),
            Some(n) => match &n.value {
                Yaml::Bool(b) => Ok(*b),
                Yaml::Null => Ok(default),
                _ => Err(cx.err(n.mark, name, "expected true or false")),
            },
        }
    };
    let kind = string(&cx, "kind")?.unwrap_or_default();
    cx.kind = kind.clone();
    let version = string(&cx, "version")?.unwrap_or_default();
    let group = string(&cx, "group")?.unwrap_or_default();
    if kind.is_empty() {
        return Err(cx.err(item.mark, "kind", "kind must not be empty"));
    }
    if version.is_empty() {
        return Err(cx.err(item.mark, "version", "version must not be empty"));
    }
    let gvk = GroupVersionKind::gvk(&group, &version, &kind);

    let chart = string(&cx, "chart")?;
    let role = string(&cx, "role")?;
    let playbook = string(&cx, "playbook")?;
    let runner = match (chart, role, playbook) {
        (Some(c), None, None) => Runner::Chart(cx.path(&c)),
        (None, Some(r), None) => Runner::Role(r),
        (None, None, Some(p)) => Runner::Playbook(cx.path(&p)),
        (None, None, None) => {
            return Err(cx.err(item.mark, "", "one of chart, role or playbook is required"))
        }
        _ => {
            return Err(cx.err(
                item.mark,
                "",
                "chart, role and playbook are exclusive: an entry runs one of them",
            ))
        }
    };
    if let Runner::Chart(path) = &runner {
        if !path.join("Chart.yaml").is_file() && path.extension().is_none_or(|e| e != "tgz") {
            let mark = fields.get("chart").map(|n| n.mark).unwrap_or(item.mark);
            return Err(cx.err(
                mark,
                "chart",
                format!("invalid chart directory {}: no Chart.yaml", path.display()),
            ));
        }
    }
    if let Runner::Playbook(path) = &runner {
        if !path.is_file() {
            let mark = fields.get("playbook").map(|n| n.mark).unwrap_or(item.mark);
            return Err(cx.err(mark, "playbook", format!("{} not found", path.display())));
        }
    }
    let is_helm = matches!(runner, Runner::Chart(_));
    for (k, v) in pairs {
        let Some(name) = k.value.as_str() else {
            continue;
        };
        let known_here = COMMON.contains(&name)
            || (is_helm && HELM.contains(&name))
            || (!is_helm && ANSIBLE.contains(&name));
        if known_here {
            continue;
        }
        let msg = if HELM.contains(&name) || ANSIBLE.contains(&name) {
            format!(
                "`{name}` applies to {} entries only; it is ignored here",
                if is_helm {
                    "role and playbook"
                } else {
                    "chart"
                }
            )
        } else {
            format!("unknown key `{name}` is ignored (operator-sdk ignores it silently)")
        };
        let _ = v;
        warnings.push(cx.warn(k.mark, msg));
    }

    let reconcile_period = match fields.get("reconcilePeriod") {
        None => None,
        Some(n) => match &n.value {
            Yaml::Str(s) => {
                Some(parse_duration(s).map_err(|m| cx.err(n.mark, "reconcilePeriod", m))?)
            }
            Yaml::Null => None,
            _ => {
                return Err(cx.err(
                    n.mark,
                    "reconcilePeriod",
                    "expected a duration such as 30s, 5m or 1h30m",
                ))
            }
        },
    };
    let max_concurrent_reconciles = match fields.get("maxConcurrentReconciles") {
        None => None,
        Some(n) => match &n.value {
            Yaml::Int(i) if (1..=1024).contains(i) => u16::try_from(*i).ok(),
            _ => {
                return Err(cx.err(
                    n.mark,
                    "maxConcurrentReconciles",
                    "expected a whole number from 1 to 1024",
                ))
            }
        },
    };
    let selector = match fields.get("selector") {
        None => None,
        Some(n) => Some(parse_selector(&cx, n)?),
    };

    let mut override_values = BTreeMap::new();
    if is_helm {
        if let Some(n) = fields.get("overrideValues") {
            let Yaml::Map(ov) = &n.value else {
                return Err(cx.err(
                    n.mark,
                    "overrideValues",
                    "expected a mapping of value paths to strings",
                ));
            };
            for (k, v) in ov {
                let key = scalar_text(&k.value).ok_or_else(|| {
                    cx.err(
                        k.mark,
                        "overrideValues",
                        "keys are value paths such as image.tag",
                    )
                })?;
                let val = scalar_text(&v.value).ok_or_else(|| {
                    cx.err(
                        v.mark,
                        &format!("overrideValues.{key}"),
                        "expected a string",
                    )
                })?;
                override_values.insert(key, expand_env(&val, env));
            }
        }
    }

    let dry_run_server = match fields.get("dryRunOption") {
        None => false,
        Some(n) => match scalar_text(&n.value).as_deref() {
            Some("server") => true,
            Some("none" | "client" | "") => false,
            _ => return Err(cx.err(n.mark, "dryRunOption", "expected none, client or server")),
        },
    };
    let (upgrade_crds, values_from) = if is_helm {
        (
            boolean(&cx, "upgradeCRDs", false)?,
            parse_values_from(&cx, fields.get("valuesFrom").copied())?,
        )
    } else {
        (false, Vec::new())
    };
    let ansible = if is_helm {
        AnsibleOptions::default()
    } else {
        parse_ansible(&cx, &fields, boolean)?
    };
    Ok(Entry {
        index: cx.index,
        line: cx.mark.line,
        gvk,
        runner,
        watch_dependent_resources: boolean(&cx, "watchDependentResources", true)?,
        selector,
        reconcile_period,
        max_concurrent_reconciles,
        override_values,
        dry_run_server,
        upgrade_crds,
        values_from,
        ansible,
    })
}

/// `valuesFrom`: a list of `{kind: Secret|ConfigMap, name, valuesKey?, optional?}` (`key` is
/// taken for `valuesKey` too). Flux's `targetPath` is refused rather than ignored: values
/// silently landing at the root would be a worse surprise.
fn parse_values_from(
    cx: &EntryCtx<'_>,
    node: Option<&Node>,
) -> Result<Vec<ValuesFrom>, WatchesError> {
    const FIELD: &str = "valuesFrom";
    let Some(n) = node else {
        return Ok(Vec::new());
    };
    let items = match &n.value {
        Yaml::Null => return Ok(Vec::new()),
        Yaml::Seq(items) => items,
        _ => {
            return Err(cx.err(
                n.mark,
                FIELD,
                "expected a list of {kind: Secret|ConfigMap, name, valuesKey, optional}",
            ))
        }
    };
    let mut out = Vec::new();
    for (i, it) in items.iter().enumerate() {
        let field = format!("{FIELD}[{i}]");
        let Yaml::Map(pairs) = &it.value else {
            return Err(cx.err(
                it.mark,
                &field,
                "expected {kind, name, valuesKey, optional}",
            ));
        };
        let (mut kind, mut name, mut key, mut optional) = (None, None, None, false);
        for (k, v) in pairs {
            let k_name = scalar_text(&k.value).unwrap_or_default();
            let text = || match &v.value {
                Yaml::Str(s) if !s.is_empty() => Ok(s.clone()),
                _ => Err(cx.err(
                    v.mark,
                    &format!("{field}.{k_name}"),
                    "expected a non-empty string",
                )),
            };
            match k_name.as_str() {
                "kind" => {
                    kind = Some(match text()?.as_str() {
                        "Secret" => ValuesSourceKind::Secret,
                        "ConfigMap" => ValuesSourceKind::ConfigMap,
                        other => {
                            return Err(cx.err(
                                v.mark,
                                &format!("{field}.kind"),
                                format!("expected Secret or ConfigMap, not {other:?}"),
                            ))
                        }
                    })
                }
                "name" => name = Some(text()?),
                "valuesKey" | "key" => key = Some(text()?),
                "optional" => match &v.value {
                    Yaml::Bool(b) => optional = *b,
                    _ => {
                        return Err(cx.err(
                            v.mark,
                            &format!("{field}.optional"),
                            "expected true or false",
                        ))
                    }
                },
                "targetPath" => {
                    return Err(cx.err(
                        k.mark,
                        &format!("{field}.targetPath"),
                        "not supported: the key must hold a YAML map of values, merged at the root",
                    ))
                }
                other => {
                    return Err(cx.err(
                        k.mark,
                        &field,
                        format!("unknown key {other:?} (kind, name, valuesKey, optional)"),
                    ))
                }
            }
        }
        let kind =
            kind.ok_or_else(|| cx.err(it.mark, &field, "kind is required (Secret or ConfigMap)"))?;
        let name = name.ok_or_else(|| cx.err(it.mark, &field, "name is required"))?;
        out.push(ValuesFrom {
            kind,
            name,
            values_key: key.unwrap_or_else(|| "values.yaml".to_string()),
            optional,
        });
    }
    Ok(out)
}

fn parse_ansible(
    cx: &EntryCtx<'_>,
    fields: &BTreeMap<String, &Node>,
    boolean: impl Fn(&EntryCtx, &str, bool) -> Result<bool, WatchesError>,
) -> Result<AnsibleOptions, WatchesError> {
    let mut o = AnsibleOptions {
        manage_status: boolean(cx, "manageStatus", true)?,
        watch_cluster_scoped_resources: boolean(cx, "watchClusterScopedResources", false)?,
        snake_case_parameters: boolean(cx, "snakeCaseParameters", true)?,
        watch_annotations_changes: boolean(cx, "watchAnnotationsChanges", false)?,
        mark_unsafe: boolean(cx, "markUnsafe", false)?,
        ..Default::default()
    };
    if let Some(n) = fields.get("vars") {
        o.vars = object(cx, n, "vars")?;
    }
    if let Some(n) = fields.get("maxRunnerArtifacts") {
        match &n.value {
            Yaml::Int(i) if *i >= 0 => {
                o.max_runner_artifacts = u32::try_from(*i).unwrap_or(u32::MAX)
            }
            _ => return Err(cx.err(n.mark, "maxRunnerArtifacts", "expected a whole number")),
        }
    }
    if let Some(n) = fields.get("blacklist") {
        let Yaml::Seq(items) = &n.value else {
            return Err(cx.err(
                n.mark,
                "blacklist",
                "expected a list of {group, version, kind}",
            ));
        };
        for it in items {
            let get = |k: &str| {
                it.value
                    .get(k)
                    .and_then(|v| v.value.as_str())
                    .unwrap_or("")
                    .to_string()
            };
            if get("kind").is_empty() || get("version").is_empty() {
                return Err(cx.err(it.mark, "blacklist", "each item needs version and kind"));
            }
            o.blacklist.push(GroupVersionKind::gvk(
                &get("group"),
                &get("version"),
                &get("kind"),
            ));
        }
    }
    if let Some(n) = fields.get("finalizer") {
        let Yaml::Map(_) = &n.value else {
            return Err(cx.err(
                n.mark,
                "finalizer",
                "expected {name, role | playbook | vars}",
            ));
        };
        let text = |k: &str| {
            n.value
                .get(k)
                .and_then(|v| v.value.as_str())
                .map(str::to_string)
        };
        let name = text("name")
            .filter(|s| !s.is_empty())
            .ok_or_else(|| cx.err(n.mark, "finalizer.name", "a finalizer needs a name"))?;
        let runner = match (text("role"), text("playbook")) {
            (Some(r), None) => Some(Runner::Role(r)),
            (None, Some(p)) => Some(Runner::Playbook(cx.path(&p))),
            (None, None) => None,
            _ => return Err(cx.err(n.mark, "finalizer", "role and playbook are exclusive")),
        };
        let vars = match n.value.get("vars") {
            Some(v) => object(cx, v, "finalizer.vars")?,
            None => Default::default(),
        };
        if runner.is_none() && vars.is_empty() {
            return Err(cx.err(
                n.mark,
                "finalizer",
                "a finalizer runs a role, a playbook, or the entry's own with vars: give one",
            ));
        }
        o.finalizer = Some(Finalizer { name, runner, vars });
    }
    Ok(o)
}

fn object(
    cx: &EntryCtx<'_>,
    n: &Node,
    field: &str,
) -> Result<serde_json::Map<String, serde_json::Value>, WatchesError> {
    match to_json(&n.value) {
        Some(serde_json::Value::Object(m)) => Ok(m),
        Some(serde_json::Value::Null) => Ok(Default::default()),
        _ => Err(cx.err(n.mark, field, "expected a mapping")),
    }
}

/// A YAML tree as JSON (keys as strings); None for what JSON cannot hold.
pub fn to_json(y: &Yaml) -> Option<serde_json::Value> {
    use serde_json::Value;
    Some(match y {
        Yaml::Null => Value::Null,
        Yaml::Bool(b) => Value::Bool(*b),
        Yaml::Int(i) => Value::from(*i),
        Yaml::BigInt(s) => Value::Number(s.parse().ok()?),
        Yaml::Float(f) => Value::from(serde_json::Number::from_f64(*f)?),
        Yaml::Str(s) => Value::String(s.clone()),
        Yaml::Seq(items) => Value::Array(
            items
                .iter()
                .map(|i| to_json(&i.value))
                .collect::<Option<_>>()?,
        ),
        Yaml::Map(pairs) => {
            let mut m = serde_json::Map::new();
            for (k, v) in pairs {
                m.insert(scalar_text(&k.value)?, to_json(&v.value)?);
            }
            Value::Object(m)
        }
        Yaml::Binary(_) | Yaml::Timestamp(_) => return None,
    })
}

fn scalar_text(y: &Yaml) -> Option<String> {
    match y {
        Yaml::Str(s) => Some(s.clone()),
        Yaml::Int(i) => Some(i.to_string()),
        Yaml::BigInt(s) => Some(s.clone()),
        Yaml::Bool(b) => Some(b.to_string()),
        Yaml::Float(f) => Some(f.to_string()),
        _ => None,
    }
}

fn parse_selector(cx: &EntryCtx<'_>, n: &Node) -> Result<LabelSelector, WatchesError> {
    let Some(value) = to_json(&n.value) else {
        return Err(cx.err(n.mark, "selector", "expected a label selector"));
    };
    let sel: LabelSelector = serde_json::from_value(value)
        .map_err(|e| cx.err(n.mark, "selector", format!("not a label selector: {e}")))?;
    for r in sel.match_expressions.iter().flatten() {
        let ok = match r.operator.as_str() {
            "In" | "NotIn" => r.values.as_ref().is_some_and(|v| !v.is_empty()),
            "Exists" | "DoesNotExist" => r.values.as_ref().is_none_or(|v| v.is_empty()),
            _ => false,
        };
        if !ok {
            return Err(cx.err(
                n.mark,
                "selector.matchExpressions",
                format!(
                    "invalid requirement on {:?}: operator {:?} with values {:?}",
                    r.key, r.operator, r.values
                ),
            ));
        }
    }
    Ok(sel)
}

/// A label selector in the API's query syntax; None when it selects everything.
pub fn selector_string(sel: &LabelSelector) -> Option<String> {
    let mut parts: Vec<String> = sel
        .match_labels
        .iter()
        .flatten()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    for LabelSelectorRequirement {
        key,
        operator,
        values,
    } in sel.match_expressions.iter().flatten()
    {
        let vals = values.clone().unwrap_or_default().join(",");
        parts.push(match operator.as_str() {
            "In" => format!("{key} in ({vals})"),
            "NotIn" => format!("{key} notin ({vals})"),
            "Exists" => key.clone(),
            _ => format!("!{key}"),
        });
    }
    (!parts.is_empty()).then(|| parts.join(","))
}

/// Go's `time.ParseDuration` for the units watches files use (h, m, s, ms).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let bad = || format!("{s:?} is not a duration such as 30s, 5m or 1h30m");
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    let mut total = 0f64;
    let mut rest = s;
    if rest.is_empty() {
        return Err(bad());
    }
    while !rest.is_empty() {
        let end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        let (num, tail) = rest.split_at(end);
        let n: f64 = num.parse().map_err(|_| bad())?;
        let unit_end = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_end);
        let secs = match unit {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 0.001,
            "us" | "µs" => 0.000_001,
            "ns" => 0.000_000_001,
            _ => return Err(bad()),
        };
        total += n * secs;
        rest = tail;
    }
    Duration::try_from_secs_f64(total).map_err(|_| bad())
}

/// `${VAR}` replaced by set variables; unset ones stay as written (ansible-operator).
fn expand_braced(text: &str, env: &dyn Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("${") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        match after.find('}') {
            Some(j) if is_var_name(&after[..j]) => {
                let name = &after[..j];
                match env(name) {
                    Some(v) => out.push_str(&v),
                    None => out.push_str(&rest[i..i + 3 + j]),
                }
                rest = &after[j + 1..];
            }
            _ => {
                out.push_str("${");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

fn is_var_name(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Go's `os.ExpandEnv`: `$VAR` and `${VAR}`, unset variables empty (helm-operator).
pub fn expand_env(text: &str, env: &dyn Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c != '$' {
            out.push(c);
            continue;
        }
        let rest = &text[i + 1..];
        if let Some(inner) = rest.strip_prefix('{') {
            if let Some(j) = inner.find('}') {
                out.push_str(&env(&inner[..j]).unwrap_or_default());
                let skip = 1 + j + 1;
                for _ in 0..inner[..j].chars().count() + 2 {
                    chars.next();
                }
                let _ = skip;
                continue;
            }
            out.push('$');
            continue;
        }
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if name.is_empty() {
            out.push('$');
            continue;
        }
        out.push_str(&env(&name).unwrap_or_default());
        for _ in 0..name.chars().count() {
            chars.next();
        }
    }
    out
}

#[cfg(test)]
mod tests;
