//! Property collector reads: many objects' properties in one `RetrievePropertiesEx` (plus
//! `ContinueRetrievePropertiesEx` pages when the server pages the answer).
use std::collections::BTreeMap;

use crate::client::Client;
use crate::error::{Error, FaultKind, Result};
use crate::soap::{self, fault_type, param};
use crate::types::{custom_values, option_values, MoRef, PowerState, VmInfo, VM_INFO_PATHS};
use crate::xml::{esc, Element};

/// One object's retrieved properties, by property path.
#[derive(Clone, Debug)]
pub struct ObjectContent {
    pub obj: MoRef,
    pub props: BTreeMap<String, Element>,
}

impl ObjectContent {
    pub fn text(&self, path: &str) -> Option<&str> {
        self.props.get(path).map(|e| e.text.as_str())
    }
}

impl Client {
    /// `paths` of each object in `objs` (all of type `kind`), in one retrieval.
    pub async fn properties(
        &self,
        objs: &[MoRef],
        kind: &str,
        paths: &[&str],
    ) -> Result<Vec<ObjectContent>> {
        if objs.is_empty() {
            return Ok(Vec::new());
        }
        let objects: String = objs
            .iter()
            .map(|o| {
                format!(
                    "<objectSet>{}<skip>false</skip></objectSet>",
                    o.to_xml("obj")
                )
            })
            .collect();
        self.retrieve(&filter_spec(kind, paths, &objects)).await
    }

    /// `paths` of every object of type `kind` directly in `folder`, in one retrieval.
    pub async fn children_properties(
        &self,
        folder: &MoRef,
        kind: &str,
        paths: &[&str],
    ) -> Result<Vec<ObjectContent>> {
        let objects = format!(
            concat!(
                "<objectSet>{}<skip>true</skip>",
                r#"<selectSet xsi:type="TraversalSpec"><name>children</name><type>Folder</type>"#,
                "<path>childEntity</path><skip>false</skip></selectSet></objectSet>"
            ),
            folder.to_xml("obj")
        );
        self.retrieve(&filter_spec(kind, paths, &objects)).await
    }

    /// Name, CPUs, memory and power state of every VM directly in `folder`: one retrieval.
    pub async fn vms_in_folder(&self, folder: &MoRef) -> Result<Vec<VmInfo>> {
        let found = self
            .children_properties(folder, "VirtualMachine", &VM_INFO_PATHS)
            .await?;
        Ok(found.iter().map(vm_info).collect())
    }

    /// The same for a list of VMs.
    pub async fn vms(&self, vms: &[MoRef]) -> Result<Vec<VmInfo>> {
        let found = self
            .properties(vms, "VirtualMachine", &VM_INFO_PATHS)
            .await?;
        Ok(found.iter().map(vm_info).collect())
    }

    async fn retrieve(&self, spec: &str) -> Result<Vec<ObjectContent>> {
        let pc = self.content().property_collector.clone();
        let method = "RetrievePropertiesEx";
        let params = format!("{spec}<options></options>");
        let (mut objects, mut token) = self
            .call(method, &pc, &params, |r| page(method, &r))
            .await?;
        while let Some(t) = token {
            let method = "ContinueRetrievePropertiesEx";
            let (more, next) = self
                .call(method, &pc, &param("token", &t), |r| page(method, &r))
                .await?;
            objects.extend(more);
            token = next;
        }
        Ok(objects)
    }
}

fn filter_spec(kind: &str, paths: &[&str], objects: &str) -> String {
    let path_set: String = paths.iter().map(|p| param("pathSet", p)).collect();
    format!(
        "<specSet><propSet><type>{}</type>{path_set}</propSet>{objects}</specSet>",
        esc(kind)
    )
}

/// One page of results and the token of the next. A property missing because the session
/// has gone is `NotAuthenticated` (vCenter and vcsim answer so instead of a fault).
fn page(method: &str, resp: &Element) -> Result<(Vec<ObjectContent>, Option<String>)> {
    let Some(rv) = resp.child("returnval") else {
        return Ok((Vec::new(), None));
    };
    let mut out = Vec::new();
    for o in rv.all("objects") {
        let obj = o
            .child("obj")
            .and_then(MoRef::from_element)
            .ok_or_else(|| Error::Protocol {
                method: method.into(),
                message: "object content without obj".into(),
            })?;
        for missing in o.all("missingSet") {
            if let Some(f) = missing.path(&["fault", "fault"]) {
                let kind = fault_type(f);
                if FaultKind::from_type(&kind) == FaultKind::NotAuthenticated {
                    return Err(soap::fault_error(method, &kind, String::new()));
                }
            }
        }
        let props = o
            .all("propSet")
            .filter_map(|p| Some((p.child_text("name")?.to_string(), p.child("val")?.clone())))
            .collect();
        out.push(ObjectContent { obj, props });
    }
    let token = rv.child_text("token").map(str::to_string);
    Ok((out, token))
}

fn vm_info(o: &ObjectContent) -> VmInfo {
    VmInfo {
        vm: o.obj.clone(),
        name: o.text("name").unwrap_or_default().to_string(),
        num_cpu: o
            .text("config.hardware.numCPU")
            .and_then(|v| v.trim().parse().ok()),
        memory_mb: o
            .text("config.hardware.memoryMB")
            .and_then(|v| v.trim().parse().ok()),
        power_state: o
            .text("runtime.powerState")
            .and_then(|v| PowerState::parse(v.trim())),
        custom_values: custom_values(o.props.get("customValue")),
        extra_config: option_values(o.props.get("config.extraConfig")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::soap::response;

    fn body(inner: &str) -> String {
        format!(
            r#"<e:Envelope xmlns:e="http://schemas.xmlsoap.org/soap/envelope/" xmlns:x="http://www.w3.org/2001/XMLSchema-instance">
            <e:Body><RetrievePropertiesExResponse xmlns="urn:vim25">{inner}</RetrievePropertiesExResponse></e:Body></e:Envelope>"#
        )
    }

    #[test]
    fn a_page_yields_objects_and_the_next_token() {
        let doc = body(
            r#"<returnval><token>t-1</token><objects><obj type="VirtualMachine">vm-1</obj>
            <propSet><name>name</name><val x:type="xsd:string">a</val></propSet>
            <propSet><name>config.hardware.numCPU</name><val x:type="xsd:int">2</val></propSet>
            </objects></returnval>"#,
        );
        let resp = response("RetrievePropertiesEx", &doc).expect("response");
        let (objs, token) = page("RetrievePropertiesEx", &resp).expect("page");
        assert_eq!(token.as_deref(), Some("t-1"));
        let info = vm_info(&objs[0]);
        assert_eq!(info.name, "a");
        assert_eq!(info.num_cpu, Some(2));
        assert_eq!(info.power_state, None);
    }

    #[test]
    fn no_returnval_is_no_objects() {
        let resp = response("RetrievePropertiesEx", &body("")).expect("response");
        let (objs, token) = page("RetrievePropertiesEx", &resp).expect("page");
        assert!(objs.is_empty() && token.is_none());
    }

    #[test]
    fn a_property_missing_for_want_of_a_session_is_not_authenticated() {
        let doc = body(
            r#"<returnval><objects><obj type="Task">task-1</obj><missingSet><path>info</path>
            <fault><fault x:type="NotAuthenticated"><object type="Task">task-1</object></fault>
            </fault></missingSet></objects></returnval>"#,
        );
        let resp = response("RetrievePropertiesEx", &doc).expect("response");
        let err = page("RetrievePropertiesEx", &resp).expect_err("not authenticated");
        assert_eq!(err.fault_kind(), Some(&FaultKind::NotAuthenticated));
    }
}
