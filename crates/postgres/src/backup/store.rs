//! A store by its location: a directory (the backup volume), or `s3://bucket/prefix` (feature
//! `s3`; endpoint, region and credentials from the environment). The operations both offer;
//! base backups and restores differ in format and live in the instance manager.
use std::path::Path;

use super::catalog::BackupInfo;
use super::volume::{StoreError, VolumeStore};

pub enum Store {
    Volume(VolumeStore),
    #[cfg(feature = "s3")]
    S3(Box<super::s3::S3Store>),
}

impl Store {
    pub fn open(location: &str) -> Result<Store, StoreError> {
        if location.starts_with("s3://") {
            #[cfg(feature = "s3")]
            return Ok(Store::S3(Box::new(super::s3::S3Store::from_location(
                location,
            )?)));
            #[cfg(not(feature = "s3"))]
            return Err(StoreError::Remote(
                "this bosun is built without the `s3` feature".into(),
            ));
        }
        Ok(Store::Volume(VolumeStore::new(location)))
    }

    pub async fn archive_wal(&self, src: &Path, name: &str) -> Result<(), StoreError> {
        match self {
            Store::Volume(v) => v.archive_wal(src, name),
            #[cfg(feature = "s3")]
            Store::S3(s) => s.archive_wal(src, name).await,
        }
    }

    pub async fn restore_wal(&self, name: &str, dest: &Path) -> Result<bool, StoreError> {
        match self {
            Store::Volume(v) => v.restore_wal(name, dest),
            #[cfg(feature = "s3")]
            Store::S3(s) => s.restore_wal(name, dest).await,
        }
    }

    pub async fn backups(&self) -> Result<Vec<BackupInfo>, StoreError> {
        match self {
            Store::Volume(v) => v.backups(),
            #[cfg(feature = "s3")]
            Store::S3(s) => s.backups().await,
        }
    }

    pub async fn wal_names(&self) -> Result<Vec<String>, StoreError> {
        match self {
            Store::Volume(v) => v.wal_names(),
            #[cfg(feature = "s3")]
            Store::S3(s) => s.wal_names().await,
        }
    }

    pub async fn delete_backup(&self, id: &str) -> Result<(), StoreError> {
        match self {
            Store::Volume(v) => v.delete_backup(id),
            #[cfg(feature = "s3")]
            Store::S3(s) => s.delete_backup(id).await,
        }
    }

    pub async fn delete_wal(&self, name: &str) -> Result<(), StoreError> {
        match self {
            Store::Volume(v) => v.delete_wal(name),
            #[cfg(feature = "s3")]
            Store::S3(s) => s.delete_wal(name).await,
        }
    }
}
