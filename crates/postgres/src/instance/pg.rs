//! PostgreSQL's programs, run as the instance's OS user: `initdb`, `pg_basebackup`,
//! `pg_rewind` and `postgres` itself, and the files the manager writes for them (password file,
//! `pg_hba.conf`, `standby.signal`). The per-instance settings are built here, purely, by
//! [`postgres_args`].
use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::process::Command;

use super::config::{Config, Credentials, InitDbOptions, Role};
use super::error::Error;
use super::os::{self, OsUser};
use super::{REPLICATION_USER, SUPERUSER};

/// One instance's programs and files.
#[derive(Clone, Debug)]
pub struct Pg {
    pub bin: PathBuf,
    pub user: Option<OsUser>,
    pub data: PathBuf,
    pub run_dir: PathBuf,
    pub log_file: Option<PathBuf>,
}

impl Pg {
    pub fn passfile(&self) -> PathBuf {
        self.run_dir.join("pgpass")
    }

    /// A command for one of PostgreSQL's programs, as the OS user, in the run directory (a
    /// directory it may enter), finding passwords in the password file.
    fn std_command(&self, program: &str) -> std::process::Command {
        use std::os::unix::process::CommandExt;
        let mut c = std::process::Command::new(self.bin.join(program));
        if let Some(u) = self.user {
            c.uid(u.uid).gid(u.gid);
        }
        c.current_dir(&self.run_dir)
            .env("PGPASSFILE", self.passfile())
            .env_remove("PGDATA")
            .env_remove("PGHOST")
            .env_remove("PGPORT")
            .stdin(Stdio::null());
        c
    }

    fn command(&self, program: &str) -> Command {
        let mut c = Command::from(self.std_command(program));
        c.kill_on_drop(true);
        c
    }

    /// Runs a program to its end; its stderr's tail is the error when it fails.
    async fn run(&self, program: &str, mut c: Command) -> Result<(), Error> {
        let out = c
            .output()
            .await
            .map_err(Error::io("starting", self.bin.join(program)))?;
        if out.status.success() {
            return Ok(());
        }
        let stderr = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(12).collect();
        Err(Error::Command {
            program: program.into(),
            status: out.status.to_string(),
            stderr: tail.into_iter().rev().collect::<Vec<_>>().join("\n"),
        })
    }

    /// The password file for base backups, rewinds and streaming (0600, the OS user's).
    pub fn write_passfile(&self, creds: &Credentials) -> Result<(), Error> {
        let text = format!(
            "*:*:*:{REPLICATION_USER}:{}\n*:*:*:{SUPERUSER}:{}\n",
            pgpass_escape(&creds.replication_password),
            pgpass_escape(&creds.superuser_password)
        );
        write_private(&self.passfile(), &text, self.user)
    }

    /// The fence mark lives in the data directory, so that it survives the container (a
    /// rewind or a re-clone replaces it with the primary's files, where it is absent).
    fn fence_mark(&self) -> PathBuf {
        self.data.join("bosun.fenced")
    }

    pub fn fenced(&self) -> bool {
        self.fence_mark().exists()
    }

    pub fn set_fenced(&self, fenced: bool) -> Result<(), Error> {
        let mark = self.fence_mark();
        if fenced {
            write_private(&mark, "fenced by the operator\n", self.user)
        } else {
            match std::fs::remove_file(&mark) {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(Error::io("removing", &mark)(e)),
            }
        }
    }

    /// Complete data: PostgreSQL's, and not left half-made by a fill that was cut short.
    pub fn has_data(&self) -> bool {
        self.data.join("PG_VERSION").is_file() && !self.filling_mark().exists()
    }

    /// Beside the data directory, on the same volume: there while the directory is being
    /// filled (initdb, a base backup, a restore). `PG_VERSION` is among the first files
    /// each of them writes, so a manager stopped or killed meanwhile (a liveness kill during
    /// a slow initdb, a SIGTERM) would otherwise find "data" on its next start and run a
    /// half-made cluster; the mark makes that start fill the directory again.
    fn filling_mark(&self) -> PathBuf {
        let mut name = self
            .data
            .file_name()
            .map(|n| n.to_os_string())
            .unwrap_or_default();
        name.push(".bosun-filling");
        self.data.with_file_name(name)
    }

    /// Marks the data directory as being filled, then clears it for new data.
    pub fn begin_filling(&self) -> Result<(), Error> {
        write_private(
            &self.filling_mark(),
            "the data directory next to this file is being filled; it is not complete\n",
            self.user,
        )?;
        os::clear_for_new_data(&self.data)
    }

    /// The data directory is complete.
    pub fn end_filling(&self) -> Result<(), Error> {
        let mark = self.filling_mark();
        match std::fs::remove_file(&mark) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::io("removing", &mark)(e)),
        }
    }

    /// A new database cluster in the (empty) data directory.
    pub async fn initdb(&self, creds: &Credentials, opts: &InitDbOptions) -> Result<(), Error> {
        self.begin_filling()?;
        let pwfile = self.run_dir.join("initdb.pw");
        write_private(&pwfile, &creds.superuser_password, self.user)?;
        let mut c = self.command("initdb");
        c.arg("-D")
            .arg(&self.data)
            .args(["-U", SUPERUSER, "-E", "UTF8"])
            .arg(format!("--locale={}", opts.locale))
            .args(["--auth-local=trust", "--auth-host=scram-sha-256"])
            .arg(format!("--pwfile={}", pwfile.display()));
        if opts.data_checksums {
            c.arg("--data-checksums");
        }
        let r = self.run("initdb", c).await;
        let _ = std::fs::remove_file(&pwfile);
        r?;
        self.write_hba()?;
        self.end_filling()
    }

    /// A copy of the primary's data through this instance's slot (made beforehand).
    pub async fn basebackup(&self, host: &str, port: u16, slot: &str) -> Result<(), Error> {
        self.begin_filling()?;
        let mut c = self.command("pg_basebackup");
        c.arg("-D")
            .arg(&self.data)
            .args(["-h", host, "-p", &port.to_string(), "-U", REPLICATION_USER])
            // Fast checkpoint: the default spreads it over minutes.
            .args(["-X", "stream", "-c", "fast", "-S", slot, "--no-password"]);
        let r = self.run("pg_basebackup", c).await;
        if r.is_err() {
            // Never leave a half copy that looks like data.
            let _ = os::clear_for_new_data(&self.data);
        }
        r?;
        self.write_hba()?;
        self.end_filling()
    }

    /// A base backup of this (running) instance into `dest`, over the private socket: plain
    /// format with the WAL it needs, so that it is consistent without the archive.
    pub async fn base_backup_to(&self, dest: &Path, port: u16) -> Result<(), Error> {
        let mut c = self.command("pg_basebackup");
        c.arg("-D")
            .arg(dest)
            .arg("-h")
            .arg(&self.run_dir)
            .args(["-p", &port.to_string(), "-U", SUPERUSER])
            .args(["-X", "stream", "-c", "fast", "--no-password"]);
        self.run("pg_basebackup", c).await
    }

    /// A base backup of this (running) instance as one gzipped tar on the child's stdout (its stderr
    /// piped too), over the private socket, for an upload that never stages it on disk. The
    /// WAL it needs is fetched into the tar at its end (`-X stream` cannot write to stdout)
    /// and the manifest is its last member, so that it is consistent without the archive.
    /// The caller reads both pipes, and kills the child if it stops reading.
    #[cfg(feature = "s3")]
    pub fn base_backup_stream(&self, port: u16) -> Result<std::process::Child, Error> {
        let mut c = self.std_command("pg_basebackup");
        c.args(["-D", "-", "-F", "t"])
            .arg("-h")
            .arg(&self.run_dir)
            .args(["-p", &port.to_string(), "-U", SUPERUSER])
            .args(["-X", "fetch", "-c", "fast", "--no-password"])
            // gzip's first level: most of its gain for a fraction of the CPU the database
            // shares meanwhile; in this C program, not in the manager.
            .args(["-Z", "1"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c.spawn()
            .map_err(Error::io("starting", self.bin.join("pg_basebackup")))
    }

    /// Writes `recovery.signal` (a restore from the archive, not a standby).
    pub fn set_recovery(&self) -> Result<(), Error> {
        let standby = self.data.join("standby.signal");
        if standby.exists() {
            std::fs::remove_file(&standby).map_err(Error::io("removing", &standby))?;
        }
        write_private(&self.data.join("recovery.signal"), "", self.user)
    }

    /// Whether the stopped data directory was last run as a primary (cleanly stopped or
    /// crashed), by `pg_controldata`'s cluster state: such data may hold WAL the new primary
    /// never received, so it must not simply start as a replica.
    pub async fn was_primary(&self) -> Result<bool, Error> {
        let mut c = self.command("pg_controldata");
        c.arg("-D").arg(&self.data).env("LC_ALL", "C");
        let out = c
            .output()
            .await
            .map_err(Error::io("starting", self.bin.join("pg_controldata")))?;
        if !out.status.success() {
            return Err(Error::Command {
                program: "pg_controldata".into(),
                status: out.status.to_string(),
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            });
        }
        Ok(state_was_primary(&String::from_utf8_lossy(&out.stdout)))
    }

    /// Rewinds the (stopped) data directory onto the source server's timeline.
    pub async fn rewind(&self, host: &str, port: u16) -> Result<(), Error> {
        let mut c = self.command("pg_rewind");
        c.arg("-D").arg(&self.data).arg(format!(
            "--source-server=host={host} port={port} user={SUPERUSER} dbname=postgres passfile={}",
            self.passfile().display()
        ));
        self.run("pg_rewind", c).await?;
        self.write_hba()
    }

    /// Makes the data directory start as `role`; a replica's own old slots are dropped (a
    /// replica serves none, and they would hold WAL forever).
    pub fn set_role(&self, role: Role) -> Result<(), Error> {
        let signal = self.data.join("standby.signal");
        match role {
            Role::Primary => match std::fs::remove_file(&signal) {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(Error::io("removing", &signal)(e)),
            },
            Role::Replica => {
                write_private(&signal, "", self.user)?;
                os::empty_dir(&self.data.join("pg_replslot"))
            }
        }
    }

    /// The client authentication file: the OS user over the private socket, passwords
    /// (SCRAM) over the network.
    pub fn write_hba(&self) -> Result<(), Error> {
        write_private(&self.data.join("pg_hba.conf"), HBA, self.user)
    }

    /// The pod's parameters into a new database's `postgresql.auto.conf`, before its first
    /// start: from then on the operator keeps that file as the spec says (ALTER SYSTEM and a
    /// reload), and a base backup or a rewind carries it to the replicas. On the command line
    /// they would win over every later ALTER SYSTEM until the pod is replaced.
    pub fn write_parameters(&self, params: &[(String, String)]) -> Result<(), Error> {
        if params.is_empty() {
            return Ok(());
        }
        let path = self.data.join("postgresql.auto.conf");
        let mut text = std::fs::read_to_string(&path).unwrap_or_default();
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&auto_conf_lines(params));
        write_private(&path, &text, self.user)
    }

    /// `postgres` on the data directory, not yet started.
    pub fn postgres(&self, args: Vec<String>) -> Result<Command, Error> {
        let mut c = self.command("postgres");
        c.arg("-D").arg(&self.data).args(args);
        if let Some(log) = &self.log_file {
            let f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(log)
                .map_err(Error::io("opening", log))?;
            let f2 = f.try_clone().map_err(Error::io("opening", log))?;
            c.stdout(f).stderr(f2);
        }
        Ok(c)
    }
}

/// Connections over the unix socket are trusted: its directory is the OS user's, mode 0700, so
/// only that user and root reach it (the manager queries state through it). Everything over
/// the network needs a SCRAM password.
const HBA: &str = "\
# Written by the bosun instance manager on every start.
local all all trust
local replication all trust
host replication streaming_replica all scram-sha-256
host all all all scram-sha-256
";

/// The per-instance settings, on the command line so that they win over any configuration
/// file a base backup or a rewind copied from another instance.
pub fn postgres_args(
    cfg: &Config,
    run_dir: &Path,
    passfile: &Path,
    role: Role,
    primary: Option<(&str, u16)>,
) -> Vec<String> {
    let mut settings: Vec<(String, String)> = vec![
        // The pod IP only: never `*`.
        ("listen_addresses".into(), cfg.pod_ip.to_string()),
        ("port".into(), cfg.port.to_string()),
        (
            "unix_socket_directories".into(),
            run_dir.display().to_string(),
        ),
        ("cluster_name".into(), cfg.name.clone()),
        ("wal_level".into(), "replica".into()),
        ("hot_standby".into(), "on".into()),
        // pg_rewind needs hint bits WAL-logged (or checksums).
        ("wal_log_hints".into(), "on".into()),
        ("max_wal_senders".into(), "16".into()),
        ("max_replication_slots".into(), "16".into()),
        ("logging_collector".into(), "off".into()),
    ];
    if let (Role::Replica, Some((host, port))) = (role, primary) {
        settings.push((
            "primary_conninfo".into(),
            format!(
                "host={host} port={port} user={REPLICATION_USER} passfile={} application_name={}",
                passfile.display(),
                cfg.name
            ),
        ));
        settings.push(("primary_slot_name".into(), cfg.slot_name()));
    }
    // Defaults the user's parameters may override (the last `-c` wins): keep WAL for a
    // while, so that a failed primary still has the WAL since the last checkpoint before the
    // divergence that pg_rewind reads (there is no archive to fetch it from yet), as
    // CloudNativePG does.
    let mut defaults: Vec<(String, String)> = vec![("wal_keep_size".into(), "512MB".into())];
    // A replica whose primary went away (restart, failover) retries every second rather than
    // every five: it streams again sooner.
    defaults.push(("wal_retrieve_retry_interval".into(), "1s".into()));
    if let Some(store) = &cfg.backups.store {
        // Only a primary archives (`on`, not `always`): after a failover the new primary
        // carries on, timeline history included.
        settings.push(("archive_mode".into(), "on".into()));
        // The owner is checked at every segment: a store another cluster took over since
        // must not get this cluster's WAL mixed into its own.
        let owner = cfg
            .backups
            .owner
            .as_ref()
            .map(|o| {
                format!(
                    " --owner-uid {} --owner-cluster {} --claim {}",
                    shell_quote(&o.uid),
                    shell_quote(&o.cluster),
                    o.claim.as_str()
                )
            })
            .unwrap_or_default();
        settings.push((
            "archive_command".into(),
            format!(
                "{} pg archive-wal --store {}{owner} %p %f",
                shell_quote(&program(cfg).display().to_string()),
                shell_quote(store)
            ),
        ));
        // A replica reads the archive when its primary no longer holds the WAL it needs
        // (its slot invalidated, a long outage): it catches up from there and streams again
        // instead of being re-cloned (issue 32, M13). Only this cluster's store (the owner
        // check); errors go to a report the manager reads, never a status that stops it.
        if let (Role::Replica, Some(_)) = (role, primary) {
            settings.push((
                "restore_command".into(),
                format!(
                    "{} pg restore-wal --store {}{owner} --standby-report {} %f %p",
                    shell_quote(&program(cfg).display().to_string()),
                    shell_quote(store),
                    shell_quote(
                        &run_dir
                            .join(super::catchup::ARCHIVE_REPORT)
                            .display()
                            .to_string()
                    )
                ),
            ));
        }
        // A quiet primary still archives its last writes within a minute (the user may
        // choose otherwise): the recovery point objective of a volume loss.
        defaults.push(("archive_timeout".into(), "60s".into()));
    }
    // The user's parameters live in postgresql.auto.conf (see `Pg::write_parameters`): a
    // default the user sets is left off the command line, where it would win over them.
    settings.extend(defaults.into_iter().filter(|(k, _)| {
        !cfg.parameters
            .iter()
            .any(|(p, _)| p.eq_ignore_ascii_case(k))
    }));
    settings
        .into_iter()
        .flat_map(|(k, v)| ["-c".to_string(), format!("{k}={v}")])
        .collect()
}

/// `name = 'value'` lines as `postgresql.auto.conf` holds them (quotes and backslashes
/// escaped, as the configuration file's parser reads them back).
pub fn auto_conf_lines(params: &[(String, String)]) -> String {
    params
        .iter()
        .map(|(k, v)| {
            format!(
                "{} = '{}'\n",
                k.to_ascii_lowercase(),
                v.replace('\\', "\\\\").replace('\'', "''")
            )
        })
        .collect()
}

/// The `bosun` binary PostgreSQL runs for archiving and restoring.
pub fn program(cfg: &Config) -> PathBuf {
    cfg.backups
        .program
        .clone()
        .or_else(|| std::env::current_exe().ok())
        .unwrap_or_else(|| PathBuf::from("/controller/bosun"))
}

/// The settings of a restore's one start: fetch WAL from the store, stop at the target (if
/// any), then promote — a new timeline, archived from then on.
pub fn recovery_args(
    cfg: &Config,
    from: &str,
    target: Option<&crate::backup::catalog::Target>,
) -> Vec<String> {
    use crate::backup::catalog::Target;
    let mut settings: Vec<(String, String)> = vec![
        (
            "restore_command".into(),
            format!(
                "{} pg restore-wal --store {} %f %p",
                shell_quote(&program(cfg).display().to_string()),
                shell_quote(from)
            ),
        ),
        ("recovery_target_timeline".into(), "latest".into()),
    ];
    match target {
        Some(Target::Time(t)) => {
            settings.push((
                "recovery_target_time".into(),
                t.format("%Y-%m-%d %H:%M:%S%.6f+00").to_string(),
            ));
            settings.push(("recovery_target_action".into(), "promote".into()));
        }
        Some(Target::Lsn(l)) => {
            settings.push((
                "recovery_target_lsn".into(),
                format!("{:X}/{:X}", l >> 32, l & 0xFFFF_FFFF),
            ));
            settings.push(("recovery_target_action".into(), "promote".into()));
        }
        None => {}
    }
    settings
        .into_iter()
        .flat_map(|(k, v)| ["-c".to_string(), format!("{k}={v}")])
        .collect()
}

/// One word for `sh -c` (PostgreSQL runs archive and restore commands through the shell).
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// `pg_controldata`'s output: the data was a primary's (`shut down`, or `in production`
/// after a crash) rather than a replica's (`shut down in recovery`, `in archive recovery`).
pub fn state_was_primary(controldata: &str) -> bool {
    controldata
        .lines()
        .find_map(|l| l.strip_prefix("Database cluster state:"))
        .map(str::trim)
        .is_some_and(|s| s == "shut down" || s == "in production")
}

/// Backslash and colon are the password file's separators.
fn pgpass_escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace(':', "\\:")
}

/// Writes a file only the OS user may read.
fn write_private(path: &Path, text: &str, user: Option<OsUser>) -> Result<(), Error> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let _ = std::fs::remove_file(path);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(Error::io("creating", path))?;
    f.write_all(text.as_bytes())
        .map_err(Error::io("writing", path))?;
    os::own_file(path, user)
}

/// The programs the manager runs.
const PROGRAMS: [&str; 5] = [
    "postgres",
    "initdb",
    "pg_basebackup",
    "pg_rewind",
    "pg_controldata",
];

fn has_programs(dir: &Path) -> bool {
    PROGRAMS.iter().all(|p| dir.join(p).is_file())
}

/// `postgres` on PATH, else the newest of Debian's /usr/lib/postgresql/<N>/bin.
pub fn find_bin(configured: Option<&Path>) -> Result<PathBuf, Error> {
    if let Some(b) = configured {
        if has_programs(b) {
            return Ok(b.to_path_buf());
        }
        return Err(Error::Config(format!(
            "{} lacks one of {PROGRAMS:?}",
            b.display()
        )));
    }
    if let Some(path) = std::env::var_os("PATH") {
        for d in std::env::split_paths(&path) {
            // A symlink on PATH (e.g. /usr/local/bin/postgres) leads to the real directory,
            // which has the other programs.
            let real = std::fs::canonicalize(d.join("postgres"))
                .ok()
                .and_then(|p| p.parent().map(Path::to_path_buf));
            if let Some(dir) = real.filter(|r| has_programs(r)) {
                return Ok(dir);
            }
        }
    }
    let newest = std::fs::read_dir("/usr/lib/postgresql")
        .ok()
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let n: u32 = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            has_programs(&bin).then_some((n, bin))
        })
        .max_by_key(|(n, _)| *n);
    newest.map(|(_, b)| b).ok_or_else(|| {
        Error::Config(
            "PostgreSQL's programs are not on PATH nor in /usr/lib/postgresql/<N>/bin (scripts/setup-postgres.sh installs them)".into(),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_primarys_data_is_told_from_a_replicas() {
        let out = |state: &str| {
            format!("pg_control version number:            1300\nDatabase cluster state:               {state}\npg_control last modified:             x\n")
        };
        assert!(state_was_primary(&out("shut down")));
        assert!(state_was_primary(&out("in production")));
        assert!(!state_was_primary(&out("shut down in recovery")));
        assert!(!state_was_primary(&out("in archive recovery")));
        assert!(!state_was_primary("no state line"));
    }
    use crate::instance::config::Credentials;

    fn config() -> Config {
        Config {
            name: "pg-2".into(),
            data_dir: "/data".into(),
            pod_ip: "127.0.0.7".parse().expect("ip"),
            pod_uid: None,
            port: 5432,
            http_port: 8000,
            bin_dir: None,
            run_dir: None,
            role: Role::Replica,
            primary: Some("127.0.0.6:5432".into()),
            os_user: None,
            parameters: vec![("shared_buffers".into(), "16MB".into())],
            log_file: None,
            isolation_timeout: None,
            start_timeout: None,
            synchronous: 0,
            backups: Default::default(),
            initdb: Default::default(),
            credentials: Credentials {
                superuser_password: "a".into(),
                replication_password: "b".into(),
                api_token: "c".into(),
                app_password: None,
            },
        }
    }

    #[test]
    fn postgres_listens_on_the_pod_ip_only() {
        let args = postgres_args(
            &config(),
            Path::new("/run/x"),
            Path::new("/run/x/pgpass"),
            Role::Primary,
            None,
        );
        assert!(
            args.contains(&"listen_addresses=127.0.0.7".to_string()),
            "{args:?}"
        );
        assert!(!args.iter().any(|a| a.contains('*')), "{args:?}");
        assert!(args.contains(&"unix_socket_directories=/run/x".to_string()));
        // The user's parameters are in postgresql.auto.conf, where a reload changes them.
        assert!(
            !args.iter().any(|a| a.starts_with("shared_buffers")),
            "{args:?}"
        );
        assert!(!args.iter().any(|a| a.starts_with("primary_conninfo")));
    }

    #[test]
    fn a_replica_streams_from_its_primary_through_its_slot_without_a_password_on_the_command_line()
    {
        let args = postgres_args(
            &config(),
            Path::new("/run/x"),
            Path::new("/run/x/pgpass"),
            Role::Replica,
            Some(("127.0.0.6", 5432)),
        );
        let conninfo = args
            .iter()
            .find(|a| a.starts_with("primary_conninfo="))
            .expect("conninfo");
        assert_eq!(
            conninfo,
            "primary_conninfo=host=127.0.0.6 port=5432 user=streaming_replica passfile=/run/x/pgpass application_name=pg-2"
        );
        assert!(args.contains(&"primary_slot_name=bosun_pg_2".to_string()));
    }

    #[test]
    fn initial_parameters_are_written_as_the_configuration_parser_reads_them() {
        let lines = auto_conf_lines(&[
            ("Work_Mem".into(), "8MB".into()),
            ("search_path".into(), r#""$user", public"#.into()),
            ("application_name".into(), r"it's a\b".into()),
        ]);
        assert_eq!(
            lines,
            "work_mem = '8MB'\nsearch_path = '\"$user\", public'\napplication_name = 'it''s a\\\\b'\n"
        );
        let mut cfg = config();
        cfg.parameters = vec![("wal_keep_size".into(), "1GB".into())];
        let args = postgres_args(
            &cfg,
            Path::new("/run/x"),
            Path::new("/run/x/pgpass"),
            Role::Primary,
            None,
        );
        assert!(
            !args.iter().any(|a| a.starts_with("wal_keep_size")),
            "{args:?}"
        );
        let args = postgres_args(
            &config(),
            Path::new("/run/x"),
            Path::new("/run/x/pgpass"),
            Role::Primary,
            None,
        );
        assert!(
            args.contains(&"wal_keep_size=512MB".to_string()),
            "{args:?}"
        );
    }

    #[test]
    fn a_replica_with_a_store_reads_this_clusters_archive_and_a_primary_does_not() {
        let mut cfg = config();
        cfg.backups.store = Some("/backup/pg".into());
        cfg.backups.program = Some("/controller/bosun".into());
        cfg.backups.owner = Some(crate::backup::owner::Owner {
            uid: "uid-1".into(),
            cluster: "pg".into(),
            claim: crate::backup::owner::Claim::Empty,
        });
        let args = |cfg: &Config, role, primary| {
            postgres_args(
                cfg,
                Path::new("/run/x"),
                Path::new("/run/x/pgpass"),
                role,
                primary,
            )
        };
        let replica = args(&cfg, Role::Replica, Some(("127.0.0.6", 5432)));
        let restore = replica
            .iter()
            .find(|a| a.starts_with("restore_command="))
            .expect("a restore_command");
        assert_eq!(
            restore,
            "restore_command='/controller/bosun' pg restore-wal --store '/backup/pg' \
             --owner-uid 'uid-1' --owner-cluster 'pg' --claim empty \
             --standby-report '/run/x/archive-failure' %f %p"
        );
        // A primary's recovery (a restore) has its own; a replica with no primary to
        // follow replays nothing it was not sent.
        for other in [
            args(&cfg, Role::Primary, None),
            args(&cfg, Role::Replica, None),
        ] {
            assert!(
                !other.iter().any(|a| a.starts_with("restore_command")),
                "{other:?}"
            );
        }
        cfg.backups.store = None;
        let no_store = args(&cfg, Role::Replica, Some(("127.0.0.6", 5432)));
        assert!(!no_store.iter().any(|a| a.starts_with("restore_command")));
    }

    #[test]
    fn pgpass_separators_are_escaped() {
        assert_eq!(pgpass_escape(r"a:b\c"), r"a\:b\\c");
    }
}
