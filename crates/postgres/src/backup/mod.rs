//! Backups: continuous WAL archiving and base backups in a store, and the restore from them.
//!
//! The store's layout (a directory on the backup volume, `<mount>/<cluster>`; an S3 prefix
//! would hold the same names):
//! - `wals/<segment>`: archived WAL segments and timeline history files, each written
//!   atomically (a temporary name, fsync, rename) by `bosun pg archive-wal`, PostgreSQL's
//!   `archive_command` on the primary (only a primary archives: `archive_mode=on`);
//! - `base/<id>/`: a base backup (`pg_basebackup`, plain format, with the WAL it needs to be
//!   consistent), complete only once `base/<id>/bosun-backup.json` exists and the directory
//!   has its final name (made as `base/<id>.partial`, renamed at the end).
//!
//! The pure parts: WAL names and their order ([`wal`]), the catalog's choices — which backup
//! a restore starts from, which ones retention removes ([`catalog`]) — and the base-backup
//! schedule ([`schedule`]). [`volume`] is the store on a directory; `s3` (feature `s3`) the
//! same layout in an S3-compatible bucket; [`store`] opens either from a location (a path,
//! or `s3://bucket/prefix`).
pub mod catalog;
pub mod owner;
pub mod restore_wal;
#[cfg(feature = "s3")]
pub mod s3;
pub mod schedule;
#[cfg(feature = "s3")]
pub mod sigv4;
pub mod store;
pub mod volume;
pub mod wal;

pub use catalog::BackupInfo;
pub use store::Store;
pub use volume::VolumeStore;
