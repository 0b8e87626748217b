//! The reasons of conditions and Events: wire names, one enum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    Healthy,
    Paused,
    Starting,
    PrimaryLost,
    Fenced,
    CreatingSeed,
    AddingReplica,
    RemovingReplica,
    RestartingInstance,
    RemovingMember,
    Fencing,
    Unfencing,
    SwitchingOver,
    Promoting,
    Rejoining,
    Failed,
    InvalidSpec,
    ActionFailed,
    BackupStarted,
    BackupSucceeded,
    BackupFailed,
    WalArchived,
    ArchiveFailing,
    NoWalArchivedYet,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Healthy => "Healthy",
            Reason::Paused => "Paused",
            Reason::Starting => "Starting",
            Reason::PrimaryLost => "PrimaryLost",
            Reason::Fenced => "Fenced",
            Reason::CreatingSeed => "CreatingSeed",
            Reason::AddingReplica => "AddingReplica",
            Reason::RemovingReplica => "RemovingReplica",
            Reason::RestartingInstance => "RestartingInstance",
            Reason::RemovingMember => "RemovingMember",
            Reason::Fencing => "Fencing",
            Reason::Unfencing => "Unfencing",
            Reason::SwitchingOver => "SwitchingOver",
            Reason::Promoting => "Promoting",
            Reason::Rejoining => "Rejoining",
            Reason::Failed => "Failed",
            Reason::InvalidSpec => "InvalidSpec",
            Reason::ActionFailed => "ActionFailed",
            Reason::BackupStarted => "BackupStarted",
            Reason::BackupSucceeded => "BackupSucceeded",
            Reason::BackupFailed => "BackupFailed",
            Reason::WalArchived => "WalArchived",
            Reason::ArchiveFailing => "ArchiveFailing",
            Reason::NoWalArchivedYet => "NoWalArchivedYet",
        }
    }
}
