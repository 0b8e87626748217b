//! `create webhook` for a Rust kind: the handlers in `src/<kind>/webhook.rs`, served by
//! bosun-runtime's webhook server through the operator that [`webhook`] registers in
//! `src/lib.rs` in place of the bare one; an end-to-end test on the test control plane; the
//! PROJECT entry as kubebuilder records it; and kubebuilder's `config/webhook` and
//! `config/certmanager` parts, written from the PROJECT file as `<project> manifests
//! --webhooks=…` prints them (the code stays the source: the files are for kustomize users).
use std::path::Path;

use serde_json::{json, Value};

use super::{insert_module_in, sections, Names};
use crate::files::Tree;
use crate::project::{Project, Resource, WebhookFlags};
use crate::{names, Error};

/// The first port `manifests --webhooks` gives (one per operator, in the order named).
const FIRST_PORT: i32 = 9443;
/// The Service `manifests --webhooks` puts in front of the webhooks.
const SERVICE: &str = "bosun-webhook";
/// The self-signed Issuer `manifests --webhooks` makes.
const ISSUER: &str = "bosun-selfsigned";

const BARE_OPERATORS: &str = "pub fn operators() -> Vec<Arc<dyn Operator>> {";
const ENV_OPERATORS: &str =
    "pub fn operators(env: &dyn Fn(&str) -> Option<String>) -> Vec<Arc<dyn Operator>> {";
const BARE_MAIN: &str = "bosun::main(bosun::Operators::new(|_env| operators()))";
const ENV_MAIN: &str = "bosun::main(bosun::Operators::new(operators))";

/// What `create webhook` writes for the kind `res` names (its hub version) with `flags`.
pub fn webhook(
    dir: &Path,
    project: &Project,
    res: &Resource,
    flags: &WebhookFlags,
) -> Result<Tree, Error> {
    let mut n = Names::of(project, res);
    n.spoke = flags.spoke.first().cloned().unwrap_or_default();
    let module_dir = format!("src/{}", n.module);
    let file = format!("{module_dir}/webhook.rs");
    if dir.join(&file).exists() {
        return Err(Error::RunnerExists(file));
    }
    if !dir.join(&module_dir).is_dir() {
        return Err(Error::Flag(format!(
            "{module_dir}/ is missing: `bosun create webhook` adds to the module `bosun create api` wrote for {}",
            res.kind
        )));
    }
    let on = |name: &str| match name {
        "defaulting" => flags.defaulting,
        "validation" => flags.validation,
        "conversion" => flags.conversion,
        "admission" => flags.defaulting || flags.validation,
        _ => false,
    };
    let mut t = Tree::default();
    t.put(
        &file,
        n.fill(&sections(include_str!("templates/webhook.rs.tmpl"), on)),
    );
    t.put(
        format!("tests/{}_webhook.rs", n.module),
        n.fill(&sections(include_str!("templates/webhook_e2e.rs.tmpl"), on)),
    );
    let mod_path = dir.join(&module_dir).join("mod.rs");
    let module = std::fs::read_to_string(&mod_path).map_err(Error::io(&mod_path))?;
    t.put(
        format!("{module_dir}/mod.rs"),
        insert_module_in(&module, "webhook"),
    );

    let lib_path = dir.join("src/lib.rs");
    let lib = std::fs::read_to_string(&lib_path).map_err(Error::io(&lib_path))?;
    let bare = format!("Arc::new({}::{}Operator),", n.module, n.kind);
    if !lib.lines().any(|l| l.trim() == bare) {
        return Err(Error::Flag(format!(
            "src/lib.rs does not register `{bare}`: replace its registration with `{}::webhook::operator(env),` yourself, or restore that line",
            n.module
        )));
    }
    let mut lib = lib.replace(&bare, &format!("{}::webhook::operator(env),", n.module));
    // The operators are built from an environment (the Deployment's for `manifests`): the
    // first webhook turns `operators()` into `operators(env)`.
    if lib.contains(BARE_OPERATORS) {
        lib = lib.replace(BARE_OPERATORS, ENV_OPERATORS);
        let main_path = dir.join("src/main.rs");
        let main = std::fs::read_to_string(&main_path).map_err(Error::io(&main_path))?;
        if !main.contains(BARE_MAIN) {
            return Err(Error::Flag(format!(
                "src/main.rs does not say `{BARE_MAIN}`: make it `{ENV_MAIN}` (the operators then read the Deployment's environment)"
            )));
        }
        t.put("src/main.rs", main.replace(BARE_MAIN, ENV_MAIN));
    } else if !lib.contains(ENV_OPERATORS) {
        return Err(Error::Flag(format!(
            "src/lib.rs has neither `{BARE_OPERATORS}` nor `{ENV_OPERATORS}`: give `operators` the environment as its argument"
        )));
    }
    t.put("src/lib.rs", lib);

    let mut with = project.clone();
    if let Some(r) = with.resources.iter_mut().find(|r| {
        r.full_group() == res.full_group() && r.kind == res.kind && r.version == res.version
    }) {
        r.webhooks = Some(flags.clone());
    }
    t.put("PROJECT", with.render());
    t.extend(kustomize_parts(&with)?);
    let makefile = dir.join("Makefile");
    if let Ok(text) = std::fs::read_to_string(&makefile) {
        t.put("Makefile", makefile_with(&text, &served(&with)));
    }
    Ok(t)
}

/// The operators with webhooks, in the PROJECT file's order (`manifests --webhooks=` order).
fn served(p: &Project) -> Vec<&Resource> {
    p.resources
        .iter()
        .filter(|r| r.webhooks.is_some())
        .collect()
}

/// The Makefile's `WEBHOOKS` (the operators whose webhooks `deploy` and `bundle` install).
fn makefile_with(text: &str, served: &[&Resource]) -> String {
    let list: Vec<String> = served.iter().map(|r| r.kind.to_ascii_lowercase()).collect();
    let line = format!("WEBHOOKS ?= {}", list.join(","));
    let mut out = String::new();
    let mut had = false;
    for l in text.split_inclusive('\n') {
        if l.starts_with("WEBHOOKS ?=") {
            out.push_str(&line);
            out.push('\n');
            had = true;
            continue;
        }
        let with_flag = (l.contains("$(BIN) manifests ") || l.contains("$(BIN) bundle --version"))
            && !l.contains("--webhooks");
        if with_flag {
            // The flag belongs to the command, before any pipe.
            let l = l.trim_end();
            let (cmd, rest) = l.split_at(l.find(" | ").unwrap_or(l.len()));
            out.push_str(&format!("{cmd} --webhooks=$(WEBHOOKS){rest}\n"));
        } else {
            out.push_str(l);
        }
        if l.starts_with("BIN ?=") && !text.contains("WEBHOOKS ?=") && !had {
            out.push_str("# The operators whose webhooks `deploy` and `bundle` serve (bosun create webhook).\n");
            out.push_str(&line);
            out.push('\n');
            had = true;
        }
    }
    out
}

fn yaml_docs(docs: &[Value]) -> Result<String, Error> {
    let mut s = String::new();
    for d in docs {
        let body = serde_yaml::to_string(d).map_err(|source| Error::Yaml {
            what: format!("{} {}", d["kind"], d["metadata"]["name"]),
            source,
        })?;
        s.push_str("---\n");
        s.push_str(&body);
    }
    Ok(s)
}

/// `config/webhook` (the configurations and the Service) and `config/certmanager` (the
/// Issuer and a Certificate per operator), as `manifests --webhooks` makes them.
fn kustomize_parts(p: &Project) -> Result<Tree, Error> {
    let ns = format!("{}-system", p.project_name);
    let mut configurations = Vec::new();
    let mut ports = Vec::new();
    let mut certificates = vec![json!({
        "apiVersion": "cert-manager.io/v1",
        "kind": "Issuer",
        "metadata": {"name": ISSUER, "namespace": ns},
        "spec": {"selfSigned": {}},
    })];
    for (i, r) in served(p).into_iter().enumerate() {
        let Some(w) = &r.webhooks else { continue };
        let lower = r.kind.to_ascii_lowercase();
        let port = FIRST_PORT + i as i32;
        let mut port_name = format!("wh-{lower}");
        port_name.truncate(15);
        ports.push(
            json!({"name": port_name, "port": port, "protocol": "TCP", "targetPort": port_name}),
        );
        let cert = format!("bosun-{lower}");
        certificates.push(json!({
            "apiVersion": "cert-manager.io/v1",
            "kind": "Certificate",
            "metadata": {"name": cert, "namespace": ns},
            "spec": {
                "secretName": cert,
                "dnsNames": [format!("{SERVICE}.{ns}.svc"), format!("{SERVICE}.{ns}.svc.cluster.local")],
                "issuerRef": {"kind": "Issuer", "name": ISSUER},
                "duration": "2160h",
                "renewBefore": "720h",
            },
        }));
        let group = r.full_group();
        let plural = names::plural(&r.kind);
        let hook = |prefix: &str, path: String| {
            let mut h = json!({
                "name": format!("{prefix}{lower}-{}.kb.io", r.version),
                "admissionReviewVersions": ["v1"],
                "clientConfig": {"service": {"name": SERVICE, "namespace": ns, "path": path, "port": port}},
                "failurePolicy": "Fail",
                "matchPolicy": "Equivalent",
                "rules": [{
                    "apiGroups": [group], "apiVersions": [r.version], "resources": [plural],
                    "operations": ["CREATE", "UPDATE"], "scope": "Namespaced",
                }],
                "sideEffects": "None",
                "timeoutSeconds": 10,
            });
            if prefix == "m" {
                h["reinvocationPolicy"] = json!("Never");
            }
            h
        };
        let path =
            |verb: &str| format!("/{verb}-{}-{}-{lower}", group.replace('.', "-"), r.version);
        let meta = json!({
            "name": format!("{}-{lower}", p.project_name),
            "annotations": {"cert-manager.io/inject-ca-from": format!("{ns}/{cert}")},
        });
        if w.defaulting {
            configurations.push(json!({
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "MutatingWebhookConfiguration",
                "metadata": meta,
                "webhooks": [hook("m", path("mutate"))],
            }));
        }
        if w.validation {
            configurations.push(json!({
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingWebhookConfiguration",
                "metadata": meta,
                "webhooks": [hook("v", path("validate"))],
            }));
        }
    }
    let service = json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": SERVICE, "namespace": ns},
        "spec": {
            "selector": {"app.kubernetes.io/name": "bosun", "app.kubernetes.io/component": "operator"},
            "ports": ports,
        },
    });
    let mut t = Tree::default();
    let header = "# Written by `bosun create webhook` from the PROJECT file; `$(BIN) manifests --webhooks=$(WEBHOOKS)`\n# prints the same objects from the code.\n";
    t.put(
        "config/webhook/manifests.yaml",
        format!("{header}{}", yaml_docs(&configurations)?),
    );
    t.put(
        "config/webhook/service.yaml",
        format!("{header}{}", yaml_docs(&[service])?),
    );
    t.put(
        "config/webhook/kustomization.yaml",
        "resources:\n- manifests.yaml\n- service.yaml\n",
    );
    t.put(
        "config/certmanager/certificate.yaml",
        format!("{header}{}", yaml_docs(&certificates)?),
    );
    t.put(
        "config/certmanager/kustomization.yaml",
        "resources:\n- certificate.yaml\n",
    );
    Ok(t)
}
