//! The ansible plugin: operator-sdk's role and playbook layout (`roles/<kind>/` with its
//! defaults, files, handlers, meta, tasks, templates and vars; `playbooks/<kind>.yml`), run by
//! bosun's role engine. Group, version and kind are required, as operator-sdk requires them.
use crate::commands::{Api, ApiOptions};
use crate::files::Tree;
use crate::Error;

/// `init`'s own files: the collections the roles use, and the empty roles/ and playbooks/.
pub fn init() -> Tree {
    let mut t = Tree::default();
    t.put(
        "requirements.yml",
        "---\n# Collections the roles use. bosun's engine runs kubernetes.core and operator_sdk.util\n# natively; these are installed only for `bosun run --ansible-engine ansible`.\ncollections:\n  - name: operator_sdk.util\n    version: \"0.5.0\"\n  - name: kubernetes.core\n    version: \"3.2.0\"\n",
    );
    t.put("roles/.placeholder", "");
    t.put("playbooks/.placeholder", "");
    t
}

/// The watches entry of an Ansible-backed kind.
fn entry(group: &str, version: &str, kind: &str, playbook: bool) -> String {
    let lower = kind.to_lowercase();
    let runner = if playbook {
        format!("playbook: playbooks/{lower}.yml")
    } else {
        format!("role: {lower}")
    };
    format!("- version: {version}\n  group: {group}\n  kind: {kind}\n  {runner}\n")
}

fn role(kind: &str) -> Tree {
    let lower = kind.to_lowercase();
    let mut t = Tree::default();
    let r = format!("roles/{lower}");
    t.put(
        format!("{r}/README.md"),
        format!("{kind}\n{}\n\nThe role bosun runs for every {kind} custom resource: its spec's fields are the\nrole's variables (in snake_case), and `ansible_operator_meta.name` and\n`ansible_operator_meta.namespace` name the resource.\n\nRole Variables\n--------------\n\nDefaults are in defaults/main.yml: the CRD's spec is described from them.\n", "=".repeat(kind.len())),
    );
    // The sample's spec, as the role reads it: bosun describes the CRD's spec from the
    // defaults (operator-sdk's file holds only its comment, and its CRD is open).
    t.put(
        format!("{r}/defaults/main.yml"),
        format!("---\n# defaults file for {kind}\n# Each variable is a field of the {kind} spec (camelCased there: `pull_policy` is\n# `pullPolicy`), typed in the CRD `make manifests` writes by its default here.\nfoo: bar\n"),
    );
    for (dir, what) in [
        ("handlers", "handlers"),
        ("tasks", "tasks"),
        ("vars", "vars"),
    ] {
        t.put(
            format!("{r}/{dir}/main.yml"),
            format!("---\n# {what} file for {kind}\n"),
        );
    }
    t.put(
        format!("{r}/meta/main.yml"),
        format!("---\ngalaxy_info:\n  role_name: {lower}\n  author: your name\n  description: reconciles {kind} resources\n  license: Apache-2.0\n  min_ansible_version: \"2.9\"\n  galaxy_tags: []\ndependencies: []\ncollections:\n- operator_sdk.util\n- kubernetes.core\n"),
    );
    t.put(format!("{r}/files/.placeholder"), "");
    t.put(format!("{r}/templates/.placeholder"), "");
    t
}

fn playbook(kind: &str, with_role: bool) -> String {
    let lower = kind.to_lowercase();
    let body = if with_role {
        format!("  tasks:\n    - import_role:\n        name: \"{lower}\"\n")
    } else {
        format!("  tasks:\n    - debug:\n        msg: \"reconciling {kind} {{{{ ansible_operator_meta.name }}}}\"\n")
    };
    format!("---\n- hosts: localhost\n  gather_facts: no\n  collections:\n    - kubernetes.core\n    - operator_sdk.util\n{body}")
}

pub fn api(opts: &ApiOptions) -> Result<Api, Error> {
    let (Some(group), Some(version), Some(kind)) = (&opts.group, &opts.version, &opts.kind) else {
        return Err(Error::MissingGvk);
    };
    crate::names::check_kind(kind)?;
    // operator-sdk leaves a FIXME entry without either flag; bosun cannot run such an entry,
    // so it scaffolds the role then.
    let with_role = opts.generate_role || !opts.generate_playbook;
    let mut files = Tree::default();
    let mut created = Vec::new();
    if with_role {
        files.extend(role(kind));
        created.push(format!("Created roles/{}", kind.to_lowercase()));
    }
    if opts.generate_playbook {
        let p = format!("playbooks/{}.yml", kind.to_lowercase());
        files.put(p.clone(), playbook(kind, with_role));
        created.push(format!("Created {p}"));
    }
    let (v, k, pb) = (version.clone(), kind.clone(), opts.generate_playbook);
    Ok(Api {
        group: group.clone(),
        version: version.clone(),
        kind: kind.clone(),
        files,
        entry: Box::new(move |g| entry(g, &v, &k, pb)),
        // operator-sdk's sample.
        sample_spec: serde_json::json!({"foo": "bar"}),
        sample_note: "TODO(user): Add fields here (the role's variables, in camelCase)",
        created,
    })
}
