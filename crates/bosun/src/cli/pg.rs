//! `bosun pg instance`: the entry point of a PostgresCluster instance's pod. Hidden from the
//! help: the operator writes it into the pods it builds; people do not run it by hand.
use bosun_runtime::manager::shutdown_signal;
use bosun_runtime::telemetry::{self, LogFormat};
use clap::{Args, Subcommand};
use tokio_util::sync::CancellationToken;

#[derive(Args, Debug)]
pub struct PgArgs {
    #[command(subcommand)]
    pub command: PgCommand,
}

#[derive(Subcommand, Debug)]
pub enum PgCommand {
    /// Run one PostgreSQL instance (initdb or join, start, serve its state and the operator's
    /// requests on the pod IP). Secrets come from BOSUN_PG_SUPERUSER_PASSWORD,
    /// BOSUN_PG_REPLICATION_PASSWORD and BOSUN_PG_API_TOKEN.
    Instance(Box<bosun_postgres::instance::Args>),
    /// Copy this binary to DEST (an instance pod's init container, from bosun's image into
    /// a volume the PostgreSQL image's container runs it from).
    Install { dest: std::path::PathBuf },
    /// PostgreSQL's archive_command on a primary with a backup store: copy the WAL file
    /// PATH into the store as NAME (atomically; the same contents again succeed).
    ArchiveWal {
        /// The store: a directory, or s3://bucket/prefix (a build with the `s3` feature).
        #[arg(long)]
        store: String,
        /// The store must be recorded as this cluster's own (or claimable, see --claim)
        /// before anything is archived.
        #[command(flatten)]
        owner: OwnerArgs,
        path: std::path::PathBuf,
        name: String,
    },
    /// PostgreSQL's restore_command during a restore: copy the archived NAME to DEST; exit
    /// status 1 when the store does not hold it (the end of the archive).
    RestoreWal {
        #[arg(long)]
        store: String,
        /// A replica's restore_command: errors are written to this file and answered as
        /// "not in the archive" (exit 1), which a standby asks again; never a fatal status.
        #[arg(long)]
        standby_report: Option<std::path::PathBuf>,
        /// A replica: WAL is read only from a store recorded as this cluster's own.
        #[command(flatten)]
        owner: OwnerArgs,
        name: String,
        dest: std::path::PathBuf,
    },
}

/// The cluster a WAL command acts for, as the instance passes it (`--owner-uid` absent or
/// empty: no owner check).
#[derive(Args, Debug)]
pub struct OwnerArgs {
    /// The cluster's UID.
    #[arg(long)]
    owner_uid: Option<String>,
    #[arg(long, default_value = "")]
    owner_cluster: String,
    #[arg(long, value_enum, default_value = "empty")]
    claim: bosun_postgres::backup::owner::Claim,
}

impl OwnerArgs {
    fn owner(self) -> Option<bosun_postgres::backup::owner::Owner> {
        let uid = self.owner_uid.filter(|u| !u.is_empty())?;
        Some(bosun_postgres::backup::owner::Owner {
            uid,
            cluster: self.owner_cluster,
            claim: self.claim,
        })
    }
}

pub async fn run(args: PgArgs) -> anyhow::Result<()> {
    match args.command {
        PgCommand::Instance(a) => {
            telemetry::init(LogFormat::Text);
            let cfg = (*a).into_config()?;
            let stop = CancellationToken::new();
            let on_signal = stop.clone();
            tokio::spawn(async move {
                shutdown_signal().await;
                on_signal.cancel();
            });
            bosun_postgres::instance::run(cfg, stop).await?;
            Ok(())
        }
        PgCommand::Install { dest } => Ok(bosun_postgres::instance::install_self(&dest)?),
        PgCommand::ArchiveWal {
            store,
            owner,
            path,
            name,
        } => {
            let store = bosun_postgres::backup::Store::open(&store)?;
            if let Some(me) = owner.owner() {
                store.ensure_owner(&me).await?;
            }
            Ok(store.archive_wal(&path, &name).await?)
        }
        PgCommand::RestoreWal {
            store,
            standby_report,
            owner,
            name,
            dest,
        } => {
            use bosun_postgres::backup::restore_wal::{
                exit_status, standby_exit_status, EXIT_STORE_FAILED, RESTORE_RETRY, STANDBY_RETRY,
            };
            let owner = owner.owner();
            // PostgreSQL reads only the exit status: a store that cannot even be opened must
            // stop the recovery too, not end it as "not in the archive".
            let code = match (bosun_postgres::backup::Store::open(&store), standby_report) {
                (Ok(store), Some(report)) => {
                    standby_exit_status(
                        &store,
                        owner.as_ref(),
                        &name,
                        &dest,
                        &report,
                        STANDBY_RETRY,
                    )
                    .await
                }
                (Ok(store), None) => exit_status(&store, &name, &dest, RESTORE_RETRY).await,
                (Err(e), report) => {
                    eprintln!("restore-wal: {e}");
                    match report {
                        Some(report) => {
                            bosun_postgres::backup::restore_wal::report_failure(
                                &report,
                                &format!("the backup store cannot be opened: {e}"),
                            );
                            bosun_postgres::backup::restore_wal::EXIT_NOT_IN_ARCHIVE
                        }
                        None => EXIT_STORE_FAILED,
                    }
                }
            };
            if code == 0 {
                Ok(())
            } else {
                std::process::exit(code)
            }
        }
    }
}
