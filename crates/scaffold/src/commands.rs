//! `init` and `create api` for every plugin: each planned as a [`Tree`] (pure), then staged,
//! completed with what [`Derive`] says about the staged watches file, and committed. What
//! differs per plugin — the runner of a kind (a chart, a role, a playbook) and a few files —
//! is in [`crate::helm`] and [`crate::ansible`].
use std::path::{Path, PathBuf};

use crate::files::{Stage, Tree};
use crate::kustomize::{self, KindRef};
use crate::project::{Project, Resource, WebhookFlags};
use crate::{ansible, helm, names, rust, top, watches, Derive, Derived, Error, Plugin};

/// kubebuilder's default `--domain`.
pub const DEFAULT_DOMAIN: &str = "my.domain";

/// The files of `config/rbac/` that hold `bosun rbac`'s objects, in the order it prints them.
pub const RBAC_FILES: [&str; 5] = [
    "config/rbac/role.yaml",
    "config/rbac/role_binding.yaml",
    "config/rbac/metrics_reader_role.yaml",
    "config/rbac/leader_election_role.yaml",
    "config/rbac/leader_election_role_binding.yaml",
];

#[derive(Debug, Clone, Default)]
pub struct InitOptions {
    pub domain: Option<String>,
    pub project_name: Option<String>,
    /// Rust: a bosun checkout the generated Cargo.toml depends on by path.
    pub bosun_source: Option<PathBuf>,
    /// Rust: a bosun git repository the generated Cargo.toml depends on (`git =`).
    pub bosun_git: Option<String>,
    /// Rust: the commit, tag or branch of `bosun_git` (cargo's `rev =`).
    pub bosun_rev: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub struct ApiOptions {
    pub group: Option<String>,
    pub version: Option<String>,
    pub kind: Option<String>,
    /// Helm: a chart directory or `.tgz`.
    pub helm_chart: Option<PathBuf>,
    /// Helm: the repository `helm_chart` is fetched from (`--helm-chart-repo URL`).
    pub helm_chart_repo: Option<String>,
    /// Helm: the version (or constraint) fetched from the repository; the latest when unset.
    pub helm_chart_version: Option<String>,
    /// Ansible: a role skeleton (`roles/<kind>/`).
    pub generate_role: bool,
    /// Ansible: a playbook (`playbooks/<kind>.yml`), importing the role when there is one.
    pub generate_playbook: bool,
}

/// What a plugin contributes to `create api`: the kind, its runner's files and watches entry,
/// and the sample's spec.
pub struct Api {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub files: Tree,
    /// The watches entry, given the full group.
    pub entry: Box<dyn Fn(&str) -> String>,
    pub sample_spec: serde_json::Value,
    /// The comment above the sample's spec.
    pub sample_note: &'static str,
    /// Lines printed after the scaffold is written (`Created helm-charts/x`).
    pub created: Vec<String>,
}

/// What `init` writes before the RBAC is derived.
pub fn plan_init(plugin: Plugin, project: &str, domain: &str) -> Tree {
    let mut t = Tree::default();
    let p = Project {
        domain: domain.to_string(),
        layout: vec![plugin.layout().to_string()],
        multigroup: false,
        project_name: project.to_string(),
        resources: vec![],
    };
    t.put("PROJECT", p.render());
    t.put("watches.yaml", watches::initial());
    t.put("Dockerfile", top::dockerfile(plugin));
    t.put("Makefile", top::makefile(plugin, project, domain));
    t.put(".gitignore", top::gitignore());
    t.put(
        ".github/workflows/verify.yml",
        crate::ci::verify_workflow(plugin),
    );
    t.put(
        "config/rbac/kustomization.yaml",
        kustomize::rbac_kustomization(&[]),
    );
    t.extend(kustomize::init(project));
    match plugin {
        Plugin::Helm => t.dirs.push("helm-charts".into()),
        Plugin::Ansible => t.extend(ansible::init()),
        // Written by `rust::init` instead (see `init`).
        Plugin::Rust => {}
    }
    t
}

/// `bosun init --plugins <plugin>` in `dir` (which must be empty but for dotfiles).
pub fn init(
    dir: &Path,
    plugin: Plugin,
    opts: &InitOptions,
    derive: &dyn Derive,
) -> Result<Vec<String>, Error> {
    let domain = opts.domain.as_deref().unwrap_or(DEFAULT_DOMAIN);
    names::check_subdomain("domain", domain)?;
    let project = match &opts.project_name {
        Some(p) => p.clone(),
        None => dir
            .canonicalize()
            .ok()
            .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_default(),
    };
    names::check_project_name(&project)?;
    if plugin == Plugin::Rust {
        rust::check_crate_name(&project)?;
    }
    std::fs::create_dir_all(dir).map_err(Error::io(dir))?;
    let mut found: Vec<String> = std::fs::read_dir(dir)
        .map_err(Error::io(dir))?
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.'))
        .collect();
    if !found.is_empty() {
        found.sort();
        return Err(Error::NotEmpty {
            dir: dir.to_path_buf(),
            found: found.join(", "),
        });
    }
    let next = "Next: define a resource with:\n$ bosun create api".to_string();
    if plugin == Plugin::Rust {
        // The CRDs and RBAC are the code's: `make manifests` prints them from the binary.
        let tree = rust::init(
            &project,
            domain,
            &rust::source(
                opts.bosun_source.as_deref(),
                opts.bosun_git.as_deref(),
                opts.bosun_rev.as_deref(),
            )?,
        );
        let stage = Stage::new(dir)?;
        stage.write(&tree)?;
        stage.commit(&tree)?;
        return Ok(vec!["Writing scaffold for you to edit...".into(), next]);
    }
    if opts.bosun_source.is_some() || opts.bosun_git.is_some() || opts.bosun_rev.is_some() {
        return Err(Error::Flag(
            "--bosun-source, --bosun-git and --bosun-rev are for --plugins rust: leave them out \
             with helm or ansible"
                .into(),
        ));
    }
    let mut tree = plan_init(plugin, &project, domain);
    let stage = Stage::new(dir)?;
    stage.write(&tree)?;
    let derived = derive
        .derive(None, &kustomize::namespace(&project))
        .map_err(Error::Derive)?;
    let extra = derived_files(&derived)?;
    stage.write(&extra)?;
    tree.extend(extra);
    stage.commit(&tree)?;
    Ok(vec![
        "Writing kustomize manifests for you to edit...".into(),
        "Writing scaffold for you to edit...".into(),
        next,
    ])
}

/// The project's plugin, from its layout; `asked` (a `--plugins` flag) must agree.
fn plugin_of(project: &Project, asked: Option<Plugin>) -> Result<Plugin, Error> {
    let found = [Plugin::Helm, Plugin::Ansible, Plugin::Rust]
        .into_iter()
        .find(|p| project.layout.iter().any(|l| l == p.layout()));
    match (found, asked) {
        (Some(f), None) => Ok(f),
        (Some(f), Some(a)) if f == a => Ok(f),
        (_, a) => Err(Error::WrongPlugin {
            layout: project.layout.join(","),
            plugin: a.unwrap_or(Plugin::Helm).layout().into(),
        }),
    }
}

/// `bosun create api` in the project at `dir`.
pub fn create_api(
    dir: &Path,
    asked: Option<Plugin>,
    opts: &ApiOptions,
    derive: &dyn Derive,
) -> Result<Vec<String>, Error> {
    let mut project = Project::read(dir)?;
    let plugin = plugin_of(&project, asked)?;
    let api = match plugin {
        Plugin::Helm => helm::api(opts)?,
        Plugin::Ansible => ansible::api(opts)?,
        Plugin::Rust => return create_rust_api(dir, project, opts),
    };
    let res = check_new(&project, &api.group, &api.version, &api.kind)?;
    let group = res.full_group();
    if let Some(taken) = api
        .files
        .files
        .keys()
        .find_map(|f| runner_dir(f).filter(|d| dir.join(d).exists()))
    {
        return Err(Error::RunnerExists(taken));
    }

    let mut tree = api.files;
    let watches_path = dir.join("watches.yaml");
    let current = match std::fs::read_to_string(&watches_path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => watches::initial(),
        Err(e) => return Err(Error::io(&watches_path)(e)),
    };
    tree.put(
        "watches.yaml",
        watches::insert(&current, &(api.entry)(&group))?,
    );
    project.resources.push(res);
    tree.put("PROJECT", project.render());

    let kinds: Vec<KindRef> = project
        .resources
        .iter()
        .map(|r| KindRef {
            group: r.full_group(),
            short_group: r.group.clone(),
            version: r.version.clone(),
            kind: r.kind.clone(),
            plural: names::plural(&r.kind),
        })
        .collect();
    let new = kinds.last().ok_or(Error::NothingToCreate)?;
    let name = &project.project_name;
    tree.put(
        "config/rbac/kustomization.yaml",
        kustomize::rbac_kustomization(&kinds),
    );
    tree.extend(kustomize::kind_roles(name, new));
    let sample =
        kustomize::sample(name, new, &api.sample_spec, api.sample_note).map_err(|source| {
            Error::Yaml {
                what: "the sample".into(),
                source,
            }
        })?;
    tree.put(
        format!("config/samples/{}", kustomize::sample_name(new)),
        sample,
    );
    let samples: Vec<String> = kinds.iter().map(kustomize::sample_name).collect();
    tree.put(
        "config/samples/kustomization.yaml",
        kustomize::samples_kustomization(&samples),
    );
    uncomment(
        dir,
        &mut tree,
        "config/default/kustomization.yaml",
        "#- ../crd",
    )?;
    uncomment(
        dir,
        &mut tree,
        "config/manifests/kustomization.yaml",
        "#- ../samples",
    )?;

    let stage = Stage::new(dir)?;
    // What the staged watches file refers to besides the new files.
    for runners in ["helm-charts", "roles", "playbooks"] {
        stage.copy_in(runners)?;
    }
    stage.write(&tree)?;
    let derived = derive
        .derive(Some(stage.path()), &kustomize::namespace(name))
        .map_err(Error::Derive)?;
    let extra = derived_files(&derived)?;
    stage.write(&extra)?;
    tree.extend(extra);
    stage.commit(&tree)?;
    let mut out = vec![
        "Writing kustomize manifests for you to edit...".to_string(),
        "Writing scaffold for you to edit...".to_string(),
    ];
    out.extend(api.created);
    out.push("Generating RBAC rules".into());
    out.push(format!(
        "Next: install the CRD and run the operator with:\n$ make install run\nthen create the sample:\n$ kubectl apply -f config/samples/{}",
        kustomize::sample_name(new)
    ));
    Ok(out)
}

#[derive(Debug, Clone, Default)]
pub struct WebhookOptions {
    pub group: Option<String>,
    pub version: Option<String>,
    pub kind: Option<String>,
    /// `--defaulting`: a mutating webhook filling in defaults.
    pub defaulting: bool,
    /// `--programmatic-validation`: a validating webhook.
    pub programmatic_validation: bool,
    /// `--conversion`: the conversion webhook between the kind's versions.
    pub conversion: bool,
    /// `--spoke`: the versions converted to and from the hub (default: all the others).
    pub spoke: Vec<String>,
}

/// `create webhook` in a Rust project: the kind's webhooks, served by bosun-runtime's
/// webhook server through its operator ([`rust::webhook`]).
pub fn create_webhook(dir: &Path, opts: &WebhookOptions) -> Result<Vec<String>, Error> {
    let project = Project::read(dir)?;
    let plugin = plugin_of(&project, None)?;
    if plugin != Plugin::Rust {
        return Err(Error::Flag(format!(
            "`create webhook` scaffolds code: this project's layout is {}, and its operator is not code bosun can add handlers to (operator-sdk's Helm and Ansible plugins have no webhooks either)",
            plugin.layout()
        )));
    }
    let (Some(group), Some(version), Some(kind)) = (&opts.group, &opts.version, &opts.kind) else {
        return Err(Error::Flag(
            "--group, --version and --kind are needed: pass those of a kind `bosun create api` made (for example --group cache --version v1alpha1 --kind Memcached)".into(),
        ));
    };
    if !(opts.defaulting || opts.programmatic_validation || opts.conversion) {
        return Err(Error::Flag(
            "nothing to scaffold: pass --defaulting, --programmatic-validation and/or --conversion"
                .into(),
        ));
    }
    let versions: Vec<&Resource> = project
        .resources
        .iter()
        .filter(|r| r.group == *group && r.kind == *kind)
        .collect();
    let Some(hub) = versions.first().copied() else {
        return Err(Error::Flag(format!(
            "the project has no kind {kind} in group {group}: run `bosun create api --group {group} --version {version} --kind {kind}` first"
        )));
    };
    if hub.version != *version {
        return Err(Error::Flag(format!(
            "--version {version}: webhooks are scaffolded for {kind}'s hub version, {} (the one the operator reconciles); with matchPolicy Equivalent the API server sends objects of other versions converted to it. Pass --version {}",
            hub.version, hub.version
        )));
    }
    if hub.webhooks.is_some() {
        return Err(Error::Flag(format!(
            "{kind}.{}/{version} has webhooks already (the PROJECT file records them): change them in src/{}/webhook.rs",
            hub.full_group(),
            rust::snake(kind)
        )));
    }
    let others: Vec<String> = versions[1..].iter().map(|r| r.version.clone()).collect();
    let spoke = if opts.spoke.is_empty() {
        others.clone()
    } else {
        opts.spoke.clone()
    };
    if opts.conversion {
        if others.is_empty() {
            return Err(Error::Flag(format!(
                "--conversion converts between versions, and {kind} has one: add another with `bosun create api --group {group} --version <v2> --kind {kind}` first"
            )));
        }
        if let Some(unknown) = spoke.iter().find(|s| !others.contains(s)) {
            return Err(Error::Flag(format!(
                "--spoke {unknown}: {kind} has no such version besides its hub (its versions: {})",
                others.join(", ")
            )));
        }
    } else if !opts.spoke.is_empty() {
        return Err(Error::Flag(
            "--spoke names the versions --conversion converts: pass --conversion too".into(),
        ));
    }
    let flags = WebhookFlags {
        defaulting: opts.defaulting,
        validation: opts.programmatic_validation,
        conversion: opts.conversion,
        spoke: if opts.conversion { spoke } else { vec![] },
        webhook_version: "v1".into(),
    };
    let tree = rust::webhook(dir, &project, hub, &flags)?;
    let stage = Stage::new(dir)?;
    stage.write(&tree)?;
    stage.commit(&tree)?;
    let module = rust::snake(kind);
    let lower = kind.to_ascii_lowercase();
    Ok(vec![
        "Writing scaffold for you to edit...".into(),
        format!("src/{module}/webhook.rs"),
        format!("tests/{module}_webhook.rs"),
        "config/webhook/, config/certmanager/".into(),
        format!(
            "Next: run the webhook's test, then the operator with its webhooks:\n$ cargo test --test {module}_webhook\n$ make install\n$ BOSUN_{}_WEBHOOK_ADDR=127.0.0.1:9443 make run",
            lower.to_ascii_uppercase()
        ),
    ])
}

/// The resource `create api` would add, refused when its names are invalid, when the project
/// has it already, or when it is of a second group in a project without multigroup.
fn check_new(project: &Project, group: &str, version: &str, kind: &str) -> Result<Resource, Error> {
    check_new_version(project, group, version, kind, false)
}

/// [`check_new`], or with `another_version` a new version of a kind the project has (a Rust
/// kind's spoke): only that exact version is then a duplicate.
fn check_new_version(
    project: &Project,
    group: &str,
    version: &str,
    kind: &str,
    another_version: bool,
) -> Result<Resource, Error> {
    names::check_subdomain("group", group)?;
    names::check_version(version)?;
    names::check_kind(kind)?;
    let res = Resource {
        group: group.to_string(),
        domain: project.domain.clone(),
        version: version.to_string(),
        kind: kind.to_string(),
        webhooks: None,
    };
    let full = res.full_group();
    names::check_subdomain("group", &full)?;
    // One CRD per kind: bosun serves one version of a kind from one runner.
    if project.resources.iter().any(|r| {
        r.full_group() == full && r.kind == kind && (!another_version || r.version == version)
    }) {
        return Err(Error::Duplicate(format!("{kind}.{full}/{version}")));
    }
    if !project.multigroup {
        if let Some(other) = project.resources.iter().find(|r| r.full_group() != full) {
            return Err(Error::SecondGroup {
                existing: other.full_group(),
                wanted: full,
                short: other.group.clone(),
            });
        }
    }
    Ok(res)
}

/// `create api` in a Rust project: the kind's module, test and sample, registered in
/// `src/lib.rs`; the CRD and RBAC are the code's (`make manifests`).
fn create_rust_api(
    dir: &Path,
    mut project: Project,
    opts: &ApiOptions,
) -> Result<Vec<String>, Error> {
    let (Some(group), Some(version), Some(kind)) = (&opts.group, &opts.version, &opts.kind) else {
        return Err(Error::MissingGvk);
    };
    if opts.helm_chart.is_some() || opts.generate_role || opts.generate_playbook {
        return Err(Error::Flag(
            "--helm-chart, --generate-role and --generate-playbook are for the helm and ansible plugins: a Rust kind is code (src/<kind>/)".into(),
        ));
    }
    let res = check_new_version(&project, group, version, kind, true)?;
    let hub = project
        .resources
        .iter()
        .find(|r| r.full_group() == res.full_group() && r.kind == res.kind)
        .cloned();
    let mut tree = match &hub {
        // Another version of a kind: a spoke of its first version.
        Some(hub) => rust::version(dir, &project, hub, &res.version)?,
        None => rust::api(dir, &project, &res)?,
    };
    let new = KindRef {
        group: res.full_group(),
        short_group: res.group.clone(),
        version: res.version.clone(),
        kind: res.kind.clone(),
        plural: names::plural(&res.kind),
    };
    project.resources.push(res);
    tree.put("PROJECT", project.render());
    let name = &project.project_name;
    let sample = kustomize::sample(
        name,
        &new,
        &serde_json::json!({"size": 1}),
        "How many pods to run",
    )
    .map_err(|source| Error::Yaml {
        what: "the sample".into(),
        source,
    })?;
    tree.put(
        format!("config/samples/{}", kustomize::sample_name(&new)),
        sample,
    );
    let samples: Vec<String> = project
        .resources
        .iter()
        .map(|r| {
            kustomize::sample_name(&KindRef {
                group: r.full_group(),
                short_group: r.group.clone(),
                version: r.version.clone(),
                kind: r.kind.clone(),
                plural: names::plural(&r.kind),
            })
        })
        .collect();
    tree.put(
        "config/samples/kustomization.yaml",
        kustomize::samples_kustomization(&samples),
    );
    let stage = Stage::new(dir)?;
    stage.write(&tree)?;
    stage.commit(&tree)?;
    if let Some(hub) = hub {
        let module = rust::snake(&new.kind);
        return Ok(vec![
            "Writing scaffold for you to edit...".into(),
            format!("src/{module}/{}.rs", new.version),
            format!("src/{module}/versions.rs"),
            format!(
                "Next: {} is a spoke of the hub {} (stored, reconciled): edit to_hub/from_hub in src/{module}/{}.rs as the versions part, and serve them with:\n$ bosun create webhook --group {} --version {} --kind {} --conversion --spoke {}",
                new.version, hub.version, new.version, hub.group, hub.version, hub.kind, new.version
            ),
        ]);
    }
    Ok(vec![
        "Writing scaffold for you to edit...".into(),
        format!("src/{}/", rust::snake(&new.kind)),
        format!("tests/{}.rs", rust::snake(&new.kind)),
        format!(
            "Next: run the tests, then the operator with:\n$ make test\n$ make install run\nthen create the sample:\n$ kubectl apply -f config/samples/{}",
            kustomize::sample_name(&new)
        ),
    ])
}

/// `bosun generate manifests` (the Makefile's `manifests`): config/crd and config/rbac derived
/// again from the project's watches file, after a chart, a role or the watches file changed.
pub fn generate_manifests(dir: &Path, derive: &dyn Derive) -> Result<Vec<String>, Error> {
    let project = Project::read(dir)?;
    let derived = derive
        .derive(Some(dir), &kustomize::namespace(&project.project_name))
        .map_err(Error::Derive)?;
    let tree = derived_files(&derived)?;
    let stage = Stage::new(dir)?;
    stage.write(&tree)?;
    stage.commit(&tree)?;
    Ok(tree.files.keys().map(|f| format!("Wrote {f}")).collect())
}

/// The directory a runner file creates (`helm-charts/x`, `roles/x`), or the playbook itself.
fn runner_dir(file: &str) -> Option<String> {
    let mut parts = file.split('/');
    match (parts.next(), parts.next()) {
        (Some(top @ ("helm-charts" | "roles")), Some(name)) => Some(format!("{top}/{name}")),
        (Some("playbooks"), Some(_)) => Some(file.to_string()),
        _ => None,
    }
}

/// operator-sdk's `create api` turns on the kustomize lines of the first API.
fn uncomment(dir: &Path, tree: &mut Tree, rel: &str, line: &str) -> Result<(), Error> {
    let path = dir.join(rel);
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Ok(());
    };
    let on = &line[1..];
    let edited: String = text
        .split_inclusive('\n')
        .map(|l| {
            if l.trim_end() == line {
                format!("{on}\n")
            } else {
                l.to_string()
            }
        })
        .collect();
    if edited != text {
        tree.put(rel, edited);
    }
    Ok(())
}

fn doc(v: &serde_json::Value) -> Result<String, Error> {
    let body = serde_yaml::to_string(v).map_err(|source| Error::Yaml {
        what: format!("{} {}", v["kind"], v["metadata"]["name"]),
        source,
    })?;
    Ok(format!("---\n{body}"))
}

/// `config/crd/bases/<group>_<plural>.yaml` per CRD, `config/crd/kustomization.yaml`, and the
/// operator's RBAC split over operator-sdk's file names.
pub fn derived_files(d: &Derived) -> Result<Tree, Error> {
    let mut t = Tree::default();
    let mut bases = Vec::new();
    for crd in &d.crds {
        let group = crd["spec"]["group"].as_str().unwrap_or_default();
        let plural = crd["spec"]["names"]["plural"].as_str().unwrap_or_default();
        let file = format!("bases/{group}_{plural}.yaml");
        t.put(format!("config/crd/{file}"), doc(crd)?);
        bases.push(file);
    }
    if !bases.is_empty() {
        t.put(
            "config/crd/kustomization.yaml",
            kustomize::crd_kustomization(&bases),
        );
    }
    for obj in &d.rbac {
        let kind = obj["kind"].as_str().unwrap_or_default();
        let name = obj["metadata"]["name"].as_str().unwrap_or_default();
        let file = match kind {
            "ClusterRole" if name.ends_with("metrics-reader") => RBAC_FILES[2],
            "ClusterRole" => RBAC_FILES[0],
            "ClusterRoleBinding" => RBAC_FILES[1],
            "Role" => RBAC_FILES[3],
            "RoleBinding" => RBAC_FILES[4],
            _ => {
                return Err(Error::Derive(
                    format!("unexpected {kind} {name} among the RBAC objects").into(),
                ))
            }
        };
        if t.files.contains_key(file) {
            return Err(Error::Derive(
                format!("two RBAC objects for {file} ({kind} {name})").into(),
            ));
        }
        t.put(file, doc(obj)?);
    }
    Ok(t)
}
