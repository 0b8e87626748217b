//! Virtual machine operations: clone, reconfigure, power on and off.
use crate::client::Client;
use crate::error::{Error, Result};
use crate::soap::param;
use crate::types::MoRef;
use crate::xml::esc;

/// Where and how a clone is made, beyond its name and folder.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CloneOptions {
    /// The resource pool of the clone. vSphere requires one to clone a template (a template
    /// has no pool of its own); a VM's clone takes the source's pool when None.
    pub pool: Option<MoRef>,
    /// `config.extraConfig` entries the clone is created with: set by the clone task itself,
    /// so a clone that completes after its caller has gone still carries them.
    pub extra_config: Vec<(String, String)>,
}

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
        self.clone_vm_with(template, folder, name, shape, &CloneOptions::default())
            .await
    }

    /// [`Client::clone_vm`] with a resource pool and extra configuration.
    pub async fn clone_vm_with(
        &self,
        template: &MoRef,
        folder: &MoRef,
        name: &str,
        shape: Shape,
        options: &CloneOptions,
    ) -> Result<MoRef> {
        let method = "CloneVM_Task";
        let pool = options
            .pool
            .as_ref()
            .map(|p| p.to_xml("pool"))
            .unwrap_or_default();
        // Element order is the schema's: numCPUs and memoryMB come before extraConfig.
        let extra: String = options
            .extra_config
            .iter()
            .map(|(k, v)| {
                format!(
                    r#"<extraConfig xsi:type="OptionValue">{}<value xsi:type="xsd:string">{}</value></extraConfig>"#,
                    param("key", k),
                    esc(v)
                )
            })
            .collect();
        let params = format!(
            "{}{}<spec><location>{pool}</location><template>false</template><config>{}{extra}</config><powerOn>false</powerOn></spec>",
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

    /// The resource pool a clone of `source` goes in when none is configured: the source's
    /// own, or for a template (which has none) its host's cluster or compute resource's root
    /// pool. None when neither can be read.
    pub async fn default_pool(&self, source: &MoRef) -> Result<Option<MoRef>> {
        let found = self
            .properties(
                std::slice::from_ref(source),
                "VirtualMachine",
                &["resourcePool", "runtime.host"],
            )
            .await?;
        let Some(o) = found.first() else {
            return Ok(None);
        };
        if let Some(pool) = o.props.get("resourcePool").and_then(MoRef::from_element) {
            return Ok(Some(pool));
        }
        let Some(host) = o.props.get("runtime.host").and_then(MoRef::from_element) else {
            return Ok(None);
        };
        let parent = self
            .properties(std::slice::from_ref(&host), "HostSystem", &["parent"])
            .await?
            .first()
            .and_then(|h| h.props.get("parent"))
            .and_then(MoRef::from_element);
        let Some(compute) = parent else {
            return Ok(None);
        };
        let kind = compute.kind.clone();
        Ok(self
            .properties(std::slice::from_ref(&compute), &kind, &["resourcePool"])
            .await?
            .first()
            .and_then(|c| c.props.get("resourcePool"))
            .and_then(MoRef::from_element))
    }

    /// Makes a powered-off VM a template.
    pub async fn mark_as_template(&self, vm: &MoRef) -> Result<()> {
        self.call("MarkAsTemplate", vm, "", |_| Ok(())).await
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
