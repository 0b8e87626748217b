//! Finding objects by inventory path, creating folders, destroying folders and VMs.
use crate::client::Client;
use crate::error::{Error, FaultKind, Result};
use crate::soap::{self, param};
use crate::types::MoRef;

impl Client {
    /// The object at an inventory path (`/DC0/vm/folder/vm-name`), or None.
    pub async fn find_by_inventory_path(&self, path: &str) -> Result<Option<MoRef>> {
        let si = self.content().search_index.clone();
        let method = "FindByInventoryPath";
        self.call(method, &si, &param("inventoryPath", path), |r| {
            Ok(r.child("returnval").and_then(MoRef::from_element))
        })
        .await
    }

    /// The object at an inventory path; a `NotFound` fault naming the path when there is none.
    pub async fn require_path(&self, path: &str) -> Result<MoRef> {
        self.find_by_inventory_path(path)
            .await?
            .ok_or_else(|| Error::Fault {
                kind: FaultKind::NotFound,
                method: "FindByInventoryPath".into(),
                message: format!("nothing at inventory path {path}"),
            })
    }

    /// Creates folder `name` in `parent`; `DuplicateName` when it exists.
    pub async fn create_folder(&self, parent: &MoRef, name: &str) -> Result<MoRef> {
        let method = "CreateFolder";
        self.call(method, parent, &param("name", name), |r| {
            soap::returned_ref(method, &r)
        })
        .await
    }

    /// Destroys a VM or a folder (with what it holds) and waits for it to be gone.
    pub async fn destroy(&self, obj: &MoRef) -> Result<()> {
        self.run_task("Destroy_Task", obj, "").await.map(|_| ())
    }
}
