//! The rust plugin: a Cargo project on `bosun-runtime` whose binary is bosun's CLI as a
//! library over the project's own operators (`bosun::main`), so `<project> run|crd|rbac|
//! manifests|bundle` work as `bosun`'s do. `init` writes the crate with no kind; each
//! `create api` adds one module per kind — `api.rs` (types with schema and docs), `plan.rs`
//! (validate → the plan), `build.rs` (the Deployment, pure, with its snapshot),
//! `reconcile.rs` (the pipeline of named steps, the operator, its RBAC) — an end-to-end test
//! on `bosun_testenv`, and registers the operator at the markers of `src/lib.rs`.
//!
//! The generated code is templates (`templates/*.tmpl`) with `__Kind__`-style placeholders,
//! kept as whole files so that they read as the Rust they become; the scaffold's test builds
//! and runs a generated project against this workspace.
mod cargo;
mod versions;
mod webhook;

use std::path::{Path, PathBuf};

use crate::files::Tree;
use crate::project::{Project, Resource};
use crate::{names, Error};

pub use cargo::{BosunSource, DEPENDENCIES};
pub use versions::version;
pub use webhook::webhook;

/// The PROJECT file's `layout`.
pub const LAYOUT: &str = "rust.bosun.dev/v1";
/// Where `create api` adds the kind's module, in `src/lib.rs`.
pub const MODULES_MARKER: &str = "// +bosun:scaffold:modules";
/// Where `create api` registers the kind's operator, in `src/lib.rs`.
pub const OPERATORS_MARKER: &str = "// +bosun:scaffold:operators";

/// The names a kind's files are written with.
struct Names<'a> {
    kind: &'a str,
    /// The module (snake_case of the kind).
    module: String,
    lower: String,
    group: String,
    version: &'a str,
    plural: String,
    project: &'a str,
    krate: String,
    /// A spoke version (`create api` for a second version; the conversion test).
    spoke: String,
}

impl Names<'_> {
    fn fill(&self, template: &str) -> String {
        template
            .replace("__kind_lower__", &self.lower)
            .replace("__kind__", &self.module)
            .replace("__Kind__", self.kind)
            .replace("__group__", &self.group)
            .replace("__version__", self.version)
            .replace("__plural__", &self.plural)
            .replace("__project__", self.project)
            .replace("__crate__", &self.krate)
            .replace("__KIND_UPPER__", &self.kind.to_ascii_uppercase())
            .replace("__group_path__", &self.group.replace('.', "-"))
            .replace("__spoke__", &self.spoke)
    }

    fn of<'a>(project: &'a Project, res: &'a Resource) -> Names<'a> {
        Names {
            kind: &res.kind,
            module: snake(&res.kind),
            lower: res.kind.to_ascii_lowercase(),
            group: res.full_group(),
            version: &res.version,
            plural: names::plural(&res.kind),
            project: &project.project_name,
            krate: crate_name(&project.project_name),
            spoke: String::new(),
        }
    }
}

/// A template with its optional sections kept or dropped: the lines between `//@@ name` and
/// `//@@ end` stay when `on(name)`, those after `//@@ !name` (up to `//@@ end`) when not.
fn sections(template: &str, on: impl Fn(&str) -> bool) -> String {
    let mut out = String::new();
    let mut keep = true;
    for line in template.split_inclusive('\n') {
        match line.trim().strip_prefix("//@@ ") {
            Some("end") => keep = true,
            Some(name) => {
                keep = match name.strip_prefix('!') {
                    Some(n) => !on(n),
                    None => on(name),
                }
            }
            None if keep => out.push_str(line),
            None => {}
        }
    }
    out
}

/// The Rust name of the project's library crate.
pub fn crate_name(project: &str) -> String {
    project.replace('-', "_")
}

/// Rust's strict and reserved keywords (2021 edition): a crate cannot be named one.
const KEYWORDS: &[&str] = &[
    "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum", "extern",
    "false", "fn", "for", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub",
    "ref", "return", "self", "Self", "static", "struct", "super", "trait", "true", "type",
    "unsafe", "use", "where", "while", "abstract", "become", "box", "do", "final", "macro",
    "override", "priv", "try", "typeof", "unsized", "virtual", "yield",
];

/// The project is a Cargo package of its name, its library `crate_name(project)`: refused when
/// that is no Rust identifier, or when it is one of bosun's crates, which the package depends on.
pub fn check_crate_name(project: &str) -> Result<(), Error> {
    let krate = crate_name(project);
    let why = if krate.starts_with(|c: char| c.is_ascii_digit()) {
        Some("starts with a digit, and a Rust crate name cannot")
    } else if KEYWORDS.contains(&krate.as_str()) {
        Some("is a Rust keyword")
    } else if cargo::BOSUN_CRATES.contains(&project) || project == "bosun-bookstore" {
        Some("is the name of a bosun crate the project depends on")
    } else {
        None
    };
    match why {
        Some(why) => Err(Error::BadName {
            what: "project name for --plugins rust".into(),
            value: project.into(),
            rule: format!("another --project-name: {project:?} {why}"),
        }),
        None => Ok(()),
    }
}

/// `BookStore` → `book_store`.
pub fn snake(kind: &str) -> String {
    let mut out = String::new();
    for (i, c) in kind.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// What `init --plugins rust` writes.
pub fn init(project: &str, domain: &str, source: &BosunSource) -> Tree {
    let mut t = Tree::default();
    let p = Project {
        domain: domain.to_string(),
        layout: vec![LAYOUT.to_string()],
        multigroup: false,
        project_name: project.to_string(),
        resources: vec![],
    };
    t.put("PROJECT", p.render());
    t.put("Cargo.toml", cargo::manifest(project, source));
    t.put("src/main.rs", main_rs(project));
    t.put("src/lib.rs", lib_rs(project));
    t.put("Makefile", makefile(project, domain));
    t.put("Dockerfile", dockerfile(project, source));
    t.put(".gitignore", "/target\n");
    t.put(
        ".github/workflows/verify.yml",
        crate::ci::verify_workflow(crate::Plugin::Rust),
    );
    t
}

fn main_rs(project: &str) -> String {
    format!(
        "//! The `{project}` binary: bosun's commands (run, crd, rbac, manifests, bundle, dev, …)\n//! over this crate's operators.\nuse {krate}::operators;\n\nfn main() -> std::process::ExitCode {{\n    bosun::main(bosun::Operators::new(|_env| operators()))\n}}\n",
        krate = crate_name(project)
    )
}

fn lib_rs(project: &str) -> String {
    format!(
        r#"//! {project}: Kubernetes operators on bosun-runtime, one module per kind. `bosun create api
//! --plugins rust` adds a kind's module and registers its operator at the markers below.
use std::sync::Arc;

use bosun_runtime::manager::Operator;

{MODULES_MARKER}

/// The operators of this binary (`{project} run --operators <name>,…` picks some).
pub fn operators() -> Vec<Arc<dyn Operator>> {{
    vec![
        {OPERATORS_MARKER}
    ]
}}
"#
    )
}

fn makefile(project: &str, domain: &str) -> String {
    format!(
        r#"# VERSION defines the project version for the bundle.
VERSION ?= 0.0.1

# IMAGE_TAG_BASE defines the registry namespace and part of the image name for remote images.
IMAGE_TAG_BASE ?= {domain}/{project}

# Image URL to use all building/pushing image targets
IMG ?= controller:latest

# The operator's own binary: bosun's commands over this crate's operators.
BIN ?= cargo run --quiet --
KUBECTL ?= kubectl
CONTAINER_TOOL ?= docker

.PHONY: all
all: build

##@ Development

.PHONY: manifests
manifests: ## Write the CRDs (config/crd) and the operator's RBAC (config/rbac) from the code.
	mkdir -p config/crd config/rbac
	$(BIN) crd > config/crd/crds.yaml
	$(BIN) rbac > config/rbac/rbac.yaml

.PHONY: fmt
fmt: ## Run cargo fmt.
	cargo fmt

.PHONY: lint
lint: ## Run clippy.
	cargo clippy --all-targets -- -D warnings

.PHONY: test
test: ## Run the unit tests and the end-to-end tests (bosun's test control plane, no cluster needed).
	cargo test

##@ Build

.PHONY: build
build: ## Build the operator's binary.
	cargo build --release

.PHONY: run
run: ## Run against the configured Kubernetes cluster in ~/.kube/config
	$(BIN) run

.PHONY: docker-build
docker-build: ## Build docker image with the manager.
	$(CONTAINER_TOOL) build -t $(IMG) .

.PHONY: docker-push
docker-push: ## Push docker image with the manager.
	$(CONTAINER_TOOL) push $(IMG)

##@ Deployment

.PHONY: install
install: ## Install the CRDs into the cluster.
	$(BIN) crd | $(KUBECTL) apply -f -

.PHONY: uninstall
uninstall: ## Uninstall the CRDs from the cluster.
	$(BIN) crd | $(KUBECTL) delete --ignore-not-found -f -

.PHONY: deploy
deploy: ## Deploy the operator (CRDs, RBAC, Deployment) to the cluster.
	$(BIN) manifests --image $(IMG) --namespace {project}-system | $(KUBECTL) apply -f -

.PHONY: undeploy
undeploy: ## Undeploy the operator from the cluster.
	$(BIN) manifests --image $(IMG) --namespace {project}-system | $(KUBECTL) delete --ignore-not-found -f -

.PHONY: bundle
bundle: ## Write the OLM bundle (bundle/, bundle.Dockerfile) and validate it.
	$(BIN) bundle --version $(VERSION) --package {project} --image $(IMG) --namespace {project}-system --samples config/samples
	$(BIN) bundle validate ./bundle
"#
    )
}

fn dockerfile(project: &str, source: &BosunSource) -> String {
    let note = match source {
        BosunSource::Path(_) => "# The bosun crates are path dependencies (--bosun-source): vendor them into the build\n# context (or switch Cargo.toml to --bosun-git) before building this image.\n",
        BosunSource::Git { .. } => "",
    };
    format!(
        "{note}FROM rust:1 AS build\nWORKDIR /src\nCOPY . .\nRUN cargo build --release --locked\n\nFROM gcr.io/distroless/cc-debian12\nCOPY --from=build /src/target/release/{project} /usr/local/bin/{project}\nUSER 65532:65532\nENTRYPOINT [\"/usr/local/bin/{project}\"]\nCMD [\"run\"]\n"
    )
}

/// What `create api --plugins rust` adds for `res` to the project at `dir`: the kind's
/// module and test, and `src/lib.rs` with the kind registered.
pub fn api(dir: &Path, project: &Project, res: &Resource) -> Result<Tree, Error> {
    let n = Names::of(project, res);
    let lib_path = dir.join("src/lib.rs");
    let lib = std::fs::read_to_string(&lib_path).map_err(Error::io(&lib_path))?;
    let module_dir = format!("src/{}", n.module);
    if dir.join(&module_dir).exists() {
        return Err(Error::RunnerExists(module_dir));
    }
    let lib = insert_module(&lib, &n.module)?;
    let lib = insert_before(
        &lib,
        OPERATORS_MARKER,
        &format!("Arc::new({}::{}Operator),", n.module, n.kind),
    )?;
    let mut t = Tree::default();
    t.put("src/lib.rs", lib);
    let files: [(&str, &str); 6] = [
        ("mod.rs", include_str!("templates/mod.rs.tmpl")),
        ("api.rs", include_str!("templates/api.rs.tmpl")),
        ("plan.rs", include_str!("templates/plan.rs.tmpl")),
        ("build.rs", include_str!("templates/build.rs.tmpl")),
        ("reconcile.rs", include_str!("templates/reconcile.rs.tmpl")),
        (
            "snapshots/deployment.yaml",
            include_str!("templates/snapshot.yaml.tmpl"),
        ),
    ];
    for (file, template) in files {
        t.put(format!("{module_dir}/{file}"), n.fill(template));
    }
    t.put(
        format!("tests/{}.rs", n.module),
        n.fill(include_str!("templates/e2e.rs.tmpl")),
    );
    Ok(t)
}

/// `pub mod <module>;` among the `pub mod` lines right above the modules marker, in the order
/// rustfmt keeps them (sorted).
fn insert_module(text: &str, module: &str) -> Result<String, Error> {
    let line = format!("pub mod {module};");
    let lines: Vec<&str> = text.lines().collect();
    let marker = lines
        .iter()
        .position(|l| l.trim() == MODULES_MARKER)
        .ok_or_else(|| Error::NoRustMarker(MODULES_MARKER.to_string()))?;
    let mut start = marker;
    while start > 0 && lines[start - 1].starts_with("pub mod ") {
        start -= 1;
    }
    let at = (start..marker)
        .find(|&i| lines[i] > line.as_str())
        .unwrap_or(marker);
    let mut out: Vec<&str> = lines[..at].to_vec();
    out.push(&line);
    out.extend(&lines[at..]);
    let mut joined = out.join("\n");
    joined.push('\n');
    Ok(joined)
}

/// `pub mod <module>;` among the first block of `pub mod` lines of a module file, sorted.
fn insert_module_in(text: &str, module: &str) -> String {
    let line = format!("pub mod {module};");
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.iter().position(|l| l.starts_with("pub mod "));
    let at = match start {
        Some(s) => {
            let end = (s..lines.len())
                .find(|&i| !lines[i].starts_with("pub mod "))
                .unwrap_or(lines.len());
            (s..end).find(|&i| lines[i] > line.as_str()).unwrap_or(end)
        }
        None => lines.len(),
    };
    let mut out: Vec<&str> = lines[..at].to_vec();
    out.push(&line);
    out.extend(&lines[at..]);
    let mut joined = out.join("\n");
    joined.push('\n');
    joined
}

/// `line` inserted above `marker`, with the marker's indentation.
fn insert_before(text: &str, marker: &str, line: &str) -> Result<String, Error> {
    let mut out = String::new();
    let mut found = false;
    for l in text.split_inclusive('\n') {
        if !found && l.trim() == marker {
            let indent = &l[..l.len() - l.trim_start().len()];
            out.push_str(&format!("{indent}{line}\n"));
            found = true;
        }
        out.push_str(l);
    }
    if found {
        Ok(out)
    } else {
        Err(Error::NoRustMarker(marker.to_string()))
    }
}

/// Where the generated project takes bosun's crates from: `--bosun-source DIR` (a checkout:
/// its `crates/bosun/Cargo.toml` must exist), or `--bosun-git URL` with an optional
/// `--bosun-rev`. Neither is a refusal naming both (and the checkout this bosun was built
/// from, when it is still there), never a silent fallback to crates.io.
pub fn source(
    dir: Option<&Path>,
    git: Option<&str>,
    rev: Option<&str>,
) -> Result<BosunSource, Error> {
    match (dir, git) {
        (Some(_), Some(_)) => Err(Error::Flag(
            "--bosun-source and --bosun-git both name bosun's crates: pass one".into(),
        )),
        (Some(_), None) if rev.is_some() => Err(Error::Flag(
            "--bosun-rev pins a --bosun-git repository: leave it out with --bosun-source".into(),
        )),
        (Some(d), None) => {
            let abs: PathBuf = d.canonicalize().map_err(Error::io(d))?;
            if abs.join("crates/bosun/Cargo.toml").is_file() {
                Ok(BosunSource::Path(abs))
            } else {
                Err(Error::BadBosunSource(d.to_path_buf()))
            }
        }
        (None, Some(url)) => {
            check_git_url(url)?;
            if let Some(r) = rev {
                if r.is_empty() || r.starts_with('-') || r.chars().any(char::is_whitespace) {
                    return Err(Error::Flag(format!(
                        "--bosun-rev {r:?}: give a commit, tag or branch name"
                    )));
                }
            }
            Ok(BosunSource::Git {
                url: url.to_string(),
                rev: rev.map(str::to_string),
            })
        }
        (None, None) => Err(Error::NoBosunSource(no_source_message(built_from()))),
    }
}

/// The checkout this binary was compiled in, if it is still on this machine.
fn built_from() -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.join("crates/bosun/Cargo.toml")
        .is_file()
        .then(|| root.canonicalize().ok())
        .flatten()
}

fn no_source_message(checkout: Option<PathBuf>) -> String {
    let mut m = String::from(
        "--plugins rust needs a source of bosun's crates, which are not on crates.io (the name \
         `bosun` there belongs to someone else): pass --bosun-source DIR (a bosun checkout), \
         or --bosun-git URL --bosun-rev REV (a bosun repository you control, pinned to a \
         commit or tag)",
    );
    if let Some(c) = checkout {
        m.push_str(&format!(
            "; this bosun was built from {}: --bosun-source {}",
            c.display(),
            c.display()
        ));
    }
    m
}

/// Cargo's `git =` takes URLs: `https://`, `http://`, `ssh://`, `git://` or `file://`.
fn check_git_url(url: &str) -> Result<(), Error> {
    let scheme_ok = ["https://", "http://", "ssh://", "git://", "file://"]
        .iter()
        .any(|s| url.strip_prefix(s).is_some_and(|rest| !rest.is_empty()));
    if scheme_ok && !url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Ok(());
    }
    Err(Error::Flag(format!(
        "--bosun-git {url:?}: give a URL cargo can fetch (https://…, ssh://git@host/…, \
         git://… or file://…); an scp-style `git@host:path` is written ssh://git@host/path"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The project is a crate: its name must compile as one and not be one of bosun's.
    #[test]
    fn a_project_name_that_cannot_be_its_crate_is_refused() {
        for bad in [
            "9lives",
            "match",
            "self",
            "bosun",
            "bosun-runtime",
            "bosun-testenv",
        ] {
            let err = check_crate_name(bad).expect_err(bad).to_string();
            assert!(err.contains("--project-name"), "{bad}: {err}");
        }
        for ok in ["shop", "my-op", "bosun-shop-operator", "r2d2"] {
            assert!(check_crate_name(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn without_a_source_the_refusal_names_every_way_out() {
        let err = source(None, None, None).expect_err("refused").to_string();
        for way in ["--bosun-source DIR", "--bosun-git URL", "--bosun-rev"] {
            assert!(err.contains(way), "{err}");
        }
        let with = no_source_message(Some("/home/me/bosun".into()));
        assert!(with.ends_with("--bosun-source /home/me/bosun"), "{with}");
    }

    #[test]
    fn git_sources_are_urls_cargo_fetches() {
        for ok in [
            "https://github.com/me/bosun",
            "ssh://git@host/me/bosun.git",
            "file:///srv/bosun.git",
        ] {
            assert!(source(None, Some(ok), Some("v0.1.0")).is_ok(), "{ok}");
        }
        for bad in [
            "git@host:me/bosun",
            "github.com/me/bosun",
            "https://",
            "https://a b",
        ] {
            let err = source(None, Some(bad), None).expect_err(bad).to_string();
            assert!(err.contains("--bosun-git"), "{err}");
        }
        let err = source(None, Some("https://h/b"), Some("--upload-pack=x"))
            .expect_err("an option, not a rev")
            .to_string();
        assert!(err.contains("--bosun-rev"), "{err}");
        let err = source(Some(Path::new(".")), Some("https://h/b"), None)
            .expect_err("both")
            .to_string();
        assert!(err.contains("pass one"), "{err}");
    }

    #[test]
    fn kinds_become_module_names() {
        assert_eq!(snake("BookStore"), "book_store");
        assert_eq!(snake("Memcached"), "memcached");
        assert_eq!(crate_name("my-op"), "my_op");
    }

    #[test]
    fn a_kind_is_inserted_at_each_marker_with_its_indentation() {
        let lib = lib_rs("shop");
        let once = insert_before(&lib, OPERATORS_MARKER, "Arc::new(a::AOperator),").expect("a");
        let twice = insert_before(&once, OPERATORS_MARKER, "Arc::new(b::BOperator),").expect("b");
        assert!(
            twice.contains(&format!(
                "        Arc::new(a::AOperator),\n        Arc::new(b::BOperator),\n        {OPERATORS_MARKER}\n"
            )),
            "{twice}"
        );
        let err =
            insert_before("fn x() {}\n", MODULES_MARKER, "pub mod a;").expect_err("no marker");
        assert!(err.to_string().contains(MODULES_MARKER), "{err}");
    }

    #[test]
    fn every_placeholder_is_filled() {
        let project = Project {
            domain: "example.com".into(),
            layout: vec![LAYOUT.into()],
            project_name: "shop-op".into(),
            ..Default::default()
        };
        let res = Resource {
            group: "cache".into(),
            domain: "example.com".into(),
            version: "v1alpha1".into(),
            kind: "BookStore".into(),
            webhooks: None,
        };
        let dir = tempfile::tempdir().expect("dir");
        std::fs::create_dir_all(dir.path().join("src")).expect("src");
        std::fs::write(dir.path().join("src/lib.rs"), lib_rs("shop-op")).expect("lib");
        let t = api(dir.path(), &project, &res).expect("api");
        for (path, data) in &t.files {
            let text = String::from_utf8_lossy(data);
            for p in [
                "__kind",
                "__Kind",
                "__group",
                "__version",
                "__plural",
                "__project",
                "__crate",
            ] {
                assert!(!text.contains(p), "{path} still holds {p}");
            }
        }
        let reconcile = String::from_utf8_lossy(&t.files["src/book_store/reconcile.rs"]);
        assert!(
            reconcile.contains("rule(\"cache.example.com\", &[\"bookstores\"]"),
            "{reconcile}"
        );
        assert!(t.files.contains_key("tests/book_store.rs"));
    }
}
