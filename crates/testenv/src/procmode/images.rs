//! Images mapped to local programs: what a container's image would have held, taken from
//! this machine. Pure: no process is started here.
use std::path::{Path, PathBuf};

/// The standard search path of Debian images (and of the official `postgres` image after its
/// own directory).
pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The repository of bosun's own image (`Dockerfile`, deploy manifests).
pub const BOSUN_REPOSITORY: &str = "ghcr.io/bosun-dev/bosun";

/// What a container of a mapped image sees besides the host's `/usr`, `/etc` and `/opt`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Image {
    /// The image's `ENV` (e.g. `PATH`), before the container's own `env`.
    pub env: Vec<(String, String)>,
    /// The image's `ENTRYPOINT`: replaced by a container's `command`.
    pub entrypoint: Vec<String>,
    /// The image's `CMD`: replaced by a container's `args`, dropped when it sets `command`.
    pub cmd: Vec<String>,
    /// Host files placed in the container at a path of the root directory (`/bosun`), as the
    /// image's build would have copied them.
    pub files: Vec<(String, PathBuf)>,
    /// Writable directories the image creates (owned by the user processes run as).
    pub dirs: Vec<String>,
}

impl Image {
    /// An image whose entrypoint is one program, placed at `container_path` (a path directly
    /// under `/`, e.g. `/bosun`).
    pub fn program(container_path: &str, host: impl Into<PathBuf>) -> Image {
        Image {
            env: vec![("PATH".into(), DEFAULT_PATH.into())],
            entrypoint: vec![container_path.to_string()],
            cmd: Vec::new(),
            files: vec![(container_path.to_string(), host.into())],
            dirs: Vec::new(),
        }
    }

    /// The argv a container runs: Kubernetes' rules for `command` and `args` over the
    /// image's entrypoint and cmd.
    pub fn argv(&self, command: &[String], args: &[String]) -> Vec<String> {
        let mut argv = if command.is_empty() {
            self.entrypoint.clone()
        } else {
            command.to_vec()
        };
        if !args.is_empty() {
            argv.extend(args.iter().cloned());
        } else if command.is_empty() {
            argv.extend(self.cmd.iter().cloned());
        }
        argv
    }
}

#[derive(Clone, Debug)]
enum Rule {
    /// `postgres:<N>[...]` → Debian's `<dir>/<N>/bin` (the official image's layout).
    Postgres { dir: PathBuf },
    /// A repository, any tag.
    Repository { repository: String, image: Image },
}

/// Image references to local programs. Anything not mapped is refused (the pod's container
/// waits with reason `ErrImageNeverPull`).
#[derive(Clone, Debug, Default)]
pub struct ImageMap {
    rules: Vec<Rule>,
}

impl ImageMap {
    /// Maps nothing.
    pub fn empty() -> ImageMap {
        ImageMap::default()
    }

    /// `postgres:<N>` (and `docker.io/library/postgres:<N>`, with suffixes such as `15.4` or
    /// `15-bookworm`) to Debian's `/usr/lib/postgresql/<N>/bin`, plus `bosun`'s image
    /// (`ghcr.io/bosun-dev/bosun`, any tag) to the `bosun` binary when one is given.
    pub fn standard(bosun: Option<PathBuf>) -> ImageMap {
        let map = ImageMap::empty().postgres("/usr/lib/postgresql");
        match bosun {
            Some(b) => map.repository(BOSUN_REPOSITORY, Image::program("/bosun", b)),
            None => map,
        }
    }

    /// Maps `postgres:<N>` to `<dir>/<N>/bin` (Debian's layout: `/usr/lib/postgresql`).
    pub fn postgres(mut self, dir: impl Into<PathBuf>) -> ImageMap {
        self.rules.push(Rule::Postgres { dir: dir.into() });
        self
    }

    /// Maps every tag of `repository` (e.g. `ghcr.io/bosun-dev/bosun`) to `image`. Later
    /// mappings win.
    pub fn repository(mut self, repository: &str, image: Image) -> ImageMap {
        self.rules.push(Rule::Repository {
            repository: normalize(repository),
            image,
        });
        self
    }

    /// What `reference` runs as here, or why it cannot run.
    pub fn resolve(&self, reference: &str) -> Result<Image, String> {
        let (repository, tag) = split(reference);
        for rule in self.rules.iter().rev() {
            match rule {
                Rule::Repository {
                    repository: r,
                    image,
                } if *r == repository => return Ok(image.clone()),
                Rule::Postgres { dir } if repository == "postgres" => {
                    return postgres_image(dir, tag);
                }
                _ => {}
            }
        }
        Err(format!(
            "image {reference:?} is not mapped to a local program by the process-mode node agent \
             (mapped: {})",
            self.describe()
        ))
    }

    fn describe(&self) -> String {
        let names: Vec<String> = self
            .rules
            .iter()
            .map(|r| match r {
                Rule::Postgres { .. } => "postgres:<major>".to_string(),
                Rule::Repository { repository, .. } => format!("{repository}:*"),
            })
            .collect();
        if names.is_empty() {
            "nothing".into()
        } else {
            names.join(", ")
        }
    }
}

fn postgres_image(dir: &Path, tag: &str) -> Result<Image, String> {
    let major: String = tag.chars().take_while(|c| c.is_ascii_digit()).collect();
    if major.is_empty() {
        return Err(format!(
            "postgres:{tag}: the process-mode node agent maps postgres images by major version \
             (postgres:15); this tag names none"
        ));
    }
    let bin = dir.join(&major).join("bin");
    if !bin.join("postgres").is_file() {
        return Err(format!(
            "postgres:{tag} needs PostgreSQL {major} installed at {} (scripts/setup-postgres.sh \
             installs Debian's postgresql-15)",
            bin.display()
        ));
    }
    Ok(Image {
        env: vec![
            ("PATH".into(), format!("{}:{DEFAULT_PATH}", bin.display())),
            ("PG_MAJOR".into(), major),
            ("PGDATA".into(), "/var/lib/postgresql/data".into()),
        ],
        entrypoint: Vec::new(),
        cmd: vec!["postgres".into()],
        files: Vec::new(),
        dirs: vec!["/var/run/postgresql".into(), "/var/lib/postgresql".into()],
    })
}

/// `docker.io/library/postgres:15@sha256:…` → (`postgres`, `15`).
fn split(reference: &str) -> (String, &str) {
    let no_digest = reference.split('@').next().unwrap_or(reference);
    let slash = no_digest.rfind('/').map(|i| i + 1).unwrap_or(0);
    let (repo, tag) = match no_digest[slash..].find(':') {
        Some(i) => (&no_digest[..slash + i], &no_digest[slash + i + 1..]),
        None => (no_digest, "latest"),
    };
    (normalize(repo), tag)
}

fn normalize(repository: &str) -> String {
    let r = repository
        .strip_prefix("docker.io/")
        .or_else(|| repository.strip_prefix("index.docker.io/"))
        .unwrap_or(repository);
    r.strip_prefix("library/").unwrap_or(r).to_string()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn fake_pg() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("15/bin")).unwrap();
        std::fs::write(d.path().join("15/bin/postgres"), "").unwrap();
        d
    }

    #[test]
    fn postgres_tags_map_to_the_major_versions_bin_dir() {
        let d = fake_pg();
        let map = ImageMap::empty().postgres(d.path());
        for r in [
            "postgres:15",
            "postgres:15.4",
            "postgres:15-bookworm",
            "docker.io/library/postgres:15",
            "library/postgres:15@sha256:abc",
        ] {
            let img = map.resolve(r).unwrap();
            let path = &img.env[0].1;
            assert!(
                path.starts_with(&format!("{}/15/bin:", d.path().display())),
                "{r}: {path}"
            );
            assert_eq!(img.argv(&[], &[]), ["postgres"]);
        }
    }

    #[test]
    fn a_major_version_not_installed_is_refused_with_the_path() {
        let d = fake_pg();
        let err = ImageMap::empty()
            .postgres(d.path())
            .resolve("postgres:16")
            .unwrap_err();
        assert!(err.contains("16/bin"), "{err}");
        assert!(err.contains("setup-postgres.sh"), "{err}");
    }

    #[test]
    fn unmapped_images_are_refused_naming_what_is_mapped() {
        let map = ImageMap::standard(Some("/x/bosun".into()));
        let err = map.resolve("nginx:1.25").unwrap_err();
        assert!(err.contains("\"nginx:1.25\""), "{err}");
        assert!(err.contains("ghcr.io/bosun-dev/bosun:*"), "{err}");
        // Another registry's postgres is another image.
        assert!(map.resolve("quay.io/x/postgres:15").is_err());
    }

    #[test]
    fn the_bosun_image_runs_the_bosun_binary_with_the_containers_args() {
        let map = ImageMap::standard(Some("/x/bosun".into()));
        let img = map.resolve("ghcr.io/bosun-dev/bosun:0.1.0").unwrap();
        assert_eq!(
            img.files,
            [("/bosun".to_string(), PathBuf::from("/x/bosun"))]
        );
        let args = vec!["pg".to_string(), "instance".to_string()];
        assert_eq!(img.argv(&[], &args), ["/bosun", "pg", "instance"]);
    }

    #[test]
    fn command_replaces_entrypoint_and_cmd_args_replace_cmd() {
        let img = Image {
            entrypoint: vec!["ep".into()],
            cmd: vec!["c1".into()],
            ..Default::default()
        };
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(img.argv(&[], &[]), ["ep", "c1"]);
        assert_eq!(img.argv(&[], &s(&["a"])), ["ep", "a"]);
        assert_eq!(img.argv(&s(&["x"]), &[]), ["x"]);
        assert_eq!(img.argv(&s(&["x"]), &s(&["a"])), ["x", "a"]);
    }
}
