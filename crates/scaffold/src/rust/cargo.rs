//! The generated `Cargo.toml`. The crates the generated code names directly are pinned to
//! the versions and features bosun's own workspace uses (checked by a test against the root
//! `Cargo.toml`), so that one `Cargo.lock` serves both and the types match bosun's.
//!
//! bosun's own crates come from a path or a git repository the user names, never from
//! crates.io: bosun publishes nothing there, and the name `bosun` on crates.io belongs to
//! someone else — a version requirement would fail to resolve today and would build that
//! party's code the day they publish one.
use std::path::PathBuf;

/// Where the bosun crates come from.
#[derive(Debug, Clone, PartialEq)]
pub enum BosunSource {
    /// `--bosun-source DIR`: path dependencies on a bosun checkout.
    Path(PathBuf),
    /// `--bosun-git URL [--bosun-rev REV]`: git dependencies on a bosun repository.
    Git { url: String, rev: Option<String> },
}

/// `(name, the dependency's TOML)`, as in bosun's `[workspace.dependencies]`.
pub const DEPENDENCIES: &[(&str, &str)] = &[
    (
        "kube",
        r#"{ version = "5.0.0", default-features = false, features = ["client", "rustls-tls", "ring", "runtime", "derive", "unstable-runtime"] }"#,
    ),
    (
        "k8s-openapi",
        r#"{ version = "0.29.0", default-features = false, features = ["v1_33", "schemars"] }"#,
    ),
    (
        "tokio",
        r#"{ version = "1", features = ["io-util", "macros", "rt-multi-thread", "signal", "time", "sync", "process", "net", "fs"] }"#,
    ),
    ("futures", r#""0.3""#),
    ("serde", r#"{ version = "1", features = ["derive"] }"#),
    ("serde_json", r#""1""#),
    ("schemars", r#""1""#),
    ("thiserror", r#""2""#),
];

/// Only for the tests: the snapshot is compared as YAML.
const DEV_DEPENDENCIES: &[(&str, &str)] = &[("serde_yaml", r#""0.9""#)];

/// The bosun crates the build reaches (bosun's CLI library pulls in its engines, not bosun's
/// own operators): with path dependencies they get bosun's own profile, so that a target dir
/// shared with a bosun checkout reuses its build.
pub(crate) const BOSUN_CRATES: &[&str] = &[
    "bosun",
    "bosun-runtime",
    "bosun-testenv",
    "bosun-watches",
    "bosun-yaml",
    "bosun-helm",
    "bosun-helm-operator",
    "bosun-ansible",
    "bosun-ansible-operator",
    "bosun-ansible-runner",
    "bosun-scaffold",
];

/// The inside of a bosun crate's dependency table: where cargo finds `name`.
fn from(name: &str, source: &BosunSource) -> String {
    match source {
        BosunSource::Path(root) => {
            let dir = name.strip_prefix("bosun-").unwrap_or(name);
            format!(
                "path = {}",
                toml_str(&root.join("crates").join(dir).display().to_string())
            )
        }
        // Cargo finds each package by name in the repository's workspace.
        BosunSource::Git { url, rev } => match rev {
            Some(r) => format!("git = {}, rev = {}", toml_str(url), toml_str(r)),
            None => format!("git = {}", toml_str(url)),
        },
    }
}

fn bosun_dep(name: &str, source: &BosunSource) -> String {
    format!("{name} = {{ {} }}\n", from(name, source))
}

/// The `bosun` crate without its default features: its CLI as a library, not bosun's own
/// operators (BookStore, MyOwnShell, VmGroup, PostgresCluster) nor `bosun dev`.
fn bosun_cli_dep(source: &BosunSource) -> String {
    format!(
        "bosun = {{ {}, default-features = false }}\n",
        from("bosun", source)
    )
}

/// A TOML basic string: a path or URL with a quote or backslash stays one string.
fn toml_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

pub fn manifest(project: &str, source: &BosunSource) -> String {
    let mut s = format!(
        "[package]\nname = \"{project}\"\nversion = \"0.1.0\"\nedition = \"2021\"\npublish = false\n\n[[bin]]\nname = \"{project}\"\npath = \"src/main.rs\"\n# main.rs is bosun::main and nothing else: no unit-test binary to link.\ntest = false\n\n[dependencies]\n"
    );
    s.push_str(&bosun_cli_dep(source));
    s.push_str(&bosun_dep("bosun-runtime", source));
    for (name, dep) in DEPENDENCIES {
        s.push_str(&format!("{name} = {dep}\n"));
    }
    s.push_str("\n[dev-dependencies]\n");
    s.push_str(&bosun_dep("bosun-testenv", source));
    for (name, dep) in DEV_DEPENDENCIES {
        s.push_str(&format!("{name} = {dep}\n"));
    }
    s.push_str(
        "\n# Line tables for this crate's backtraces; no debug info for the dependencies (test binaries\n# linking kube and k8s-openapi stay small).\n[profile.dev]\ndebug = \"line-tables-only\"\n\n[profile.dev.package.\"*\"]\ndebug = false\n",
    );
    if let BosunSource::Path(_) = source {
        s.push_str("\n# bosun's crates as bosun's own workspace builds them, so a target dir shared with it is reused.\n");
        for c in BOSUN_CRATES {
            s.push_str(&format!(
                "[profile.dev.package.{c}]\ndebug = \"line-tables-only\"\n"
            ));
        }
    }
    s.push_str("\n[lints.clippy]\nunwrap_used = \"deny\"\n\n# Its own workspace, even when created inside another one.\n[workspace]\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pins equal bosun's `[workspace.dependencies]` (a bump there must be made here).
    #[test]
    fn pins_match_the_workspace() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.toml");
        let text = std::fs::read_to_string(&root).expect("the workspace's Cargo.toml");
        for (name, dep) in DEPENDENCIES.iter().chain(DEV_DEPENDENCIES) {
            let line = format!("{name} = {dep}");
            assert!(
                text.lines().any(|l| l == line),
                "{name}: the workspace no longer says {dep}"
            );
        }
        for c in BOSUN_CRATES.iter().filter(|c| **c != "bosun") {
            assert!(
                text.contains(&format!(
                    "{c} = {{ path = \"crates/{}\" }}",
                    &c["bosun-".len()..]
                )),
                "{c} is not a workspace crate"
            );
        }
    }

    #[test]
    fn path_and_version_sources() {
        let p = manifest("shop", &BosunSource::Path("/src/bosun".into()));
        assert!(
            p.contains("bosun-runtime = { path = \"/src/bosun/crates/runtime\" }"),
            "{p}"
        );
        assert!(
            p.contains("bosun = { path = \"/src/bosun/crates/bosun\", default-features = false }"),
            "{p}"
        );
        let g = manifest(
            "shop",
            &BosunSource::Git {
                url: "https://git.example/bosun.git".into(),
                rev: Some("v0.1.0".into()),
            },
        );
        assert!(
            g.contains(
                "bosun-testenv = { git = \"https://git.example/bosun.git\", rev = \"v0.1.0\" }"
            ) && !g.contains("{ path ="),
            "{g}"
        );
        assert!(
            g.contains("\nbosun = { git = \"https://git.example/bosun.git\", rev = \"v0.1.0\", default-features = false }\n"),
            "{g}"
        );
    }

    /// Every bosun dependency of every source names where it comes from: none is left to
    /// crates.io, where bosun publishes nothing.
    #[test]
    fn no_bosun_crate_from_crates_io() {
        for source in [
            BosunSource::Path("/src/bo\"sun".into()),
            BosunSource::Git {
                url: "https://git.example/bosun.git".into(),
                rev: None,
            },
        ] {
            let m = manifest("shop", &source);
            for line in m.lines().filter(|l| l.starts_with("bosun")) {
                assert!(
                    line.contains("path = ") || line.contains("git = "),
                    "{line}"
                );
            }
            assert!(
                m.contains("path = \"/src/bo\\\"sun/crates/runtime\"") || m.contains("git ="),
                "{m}"
            );
        }
    }
}
