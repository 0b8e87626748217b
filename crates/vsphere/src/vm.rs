//! Virtual machine operations: clone, reconfigure, power on and off.
use crate::client::Client;
use crate::error::{Error, Result};
use crate::soap::param;
use crate::types::MoRef;

/// The shape a VM is given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    pub num_cpus: u32,
    pub memory_mb: u64,
}

impl Shape {
    fn to_xml(self) -> String {
        format!(
            "{}{}",
            param("numCPUs", &self.num_cpus.to_string()),
            param("memoryMB", &self.memory_mb.to_string())
        )
    }
}

impl Client {
    /// Clones `template` into `folder` as `name`, powered off, asking for `shape`. Some
    /// servers (vcsim) ignore the shape of a clone: call [`Client::reconfigure`] after.
    pub async fn clone_vm(
        &self,
        template: &MoRef,
        folder: &MoRef,
        name: &str,
        shape: Shape,
    ) -> Result<MoRef> {
        let method = "CloneVM_Task";
        let params = format!(
            "{}{}<spec><location></location><template>false</template><config>{}</config><powerOn>false</powerOn></spec>",
            folder.to_xml("folder"),
            param("name", name),
            shape.to_xml()
        );
        self.run_task(method, template, &params)
            .await?
            .ok_or_else(|| Error::Protocol {
                method: method.into(),
                message: "the clone task returned no VM".into(),
            })
    }

    /// Sets the VM's CPUs and memory.
    pub async fn reconfigure(&self, vm: &MoRef, shape: Shape) -> Result<()> {
        let params = format!("<spec>{}</spec>", shape.to_xml());
        self.run_task("ReconfigVM_Task", vm, &params)
            .await
            .map(|_| ())
    }

    pub async fn power_on(&self, vm: &MoRef) -> Result<()> {
        self.run_task("PowerOnVM_Task", vm, "").await.map(|_| ())
    }

    pub async fn power_off(&self, vm: &MoRef) -> Result<()> {
        self.run_task("PowerOffVM_Task", vm, "").await.map(|_| ())
    }
}
