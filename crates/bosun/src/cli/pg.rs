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
    }
}
