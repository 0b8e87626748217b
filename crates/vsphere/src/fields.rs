//! Custom fields (`CustomFieldsManager`): the attributes vCenter shows on every managed
//! entity, which an operator uses to mark what it created; and the folder read that an
//! ownership check needs.
use crate::client::Client;
use crate::error::{Error, FaultKind, Result};
use crate::soap::param;
use crate::types::{custom_values, FolderInfo, MoRef};

impl Client {
    /// The key of the custom field `name` that applies to every managed entity type,
    /// defined first when vCenter has none of that name. Kept by the client once known (a
    /// key refused by `SetField` is forgotten, the field removed meanwhile).
    pub async fn custom_field(&self, name: &str) -> Result<i32> {
        if let Some(k) = self.fields().lock().ok().and_then(|f| f.get(name).copied()) {
            return Ok(k);
        }
        let key = self.lookup_or_add_field(name).await?;
        if let Ok(mut f) = self.fields().lock() {
            f.insert(name.to_string(), key);
        }
        Ok(key)
    }

    async fn lookup_or_add_field(&self, name: &str) -> Result<i32> {
        let cfm = self.custom_fields_manager()?;
        if let Some(k) = self.find_field(&cfm, name).await? {
            return Ok(k);
        }
        let method = "AddCustomFieldDef";
        let added = self
            .call(method, &cfm, &param("name", name), |r| {
                Ok(r.path(&["returnval", "key"])
                    .and_then(|k| k.text.trim().parse::<i32>().ok()))
            })
            .await;
        match added {
            Ok(Some(k)) => Ok(k),
            // Defined meanwhile by another client: read it.
            Ok(None)
            | Err(Error::Fault {
                kind: FaultKind::DuplicateName,
                ..
            }) => self
                .find_field(&cfm, name)
                .await?
                .ok_or_else(|| Error::Protocol {
                    method: method.into(),
                    message: format!("custom field {name} neither added nor found"),
                }),
            Err(e) => Err(e),
        }
    }

    /// Sets the custom field `key` of `entity` to `value`.
    pub async fn set_field(&self, entity: &MoRef, key: i32, value: &str) -> Result<()> {
        let cfm = self.custom_fields_manager()?;
        let params = format!(
            "{}{}{}",
            entity.to_xml("entity"),
            param("key", &key.to_string()),
            param("value", value)
        );
        let r = self.call("SetField", &cfm, &params, |_| Ok(())).await;
        if matches!(&r, Err(e) if e.fault_kind() == Some(&FaultKind::InvalidArgument)) {
            if let Ok(mut f) = self.fields().lock() {
                f.retain(|_, k| *k != key);
            }
        }
        r
    }

    /// A folder's name, custom values and children; None when it no longer exists or the
    /// reference is not a folder.
    pub async fn folder_info(&self, folder: &MoRef) -> Result<Option<FolderInfo>> {
        if folder.kind != "Folder" {
            return Ok(None);
        }
        let found = match self
            .properties(
                std::slice::from_ref(folder),
                "Folder",
                &["name", "customValue", "childEntity"],
            )
            .await
        {
            Err(e) if e.fault_kind() == Some(&FaultKind::NotFound) => return Ok(None),
            other => other?,
        };
        let Some(o) = found.into_iter().next() else {
            return Ok(None);
        };
        let Some(name) = o.text("name").map(str::to_string) else {
            // A deleted object answers with no properties rather than a fault on some servers.
            return Ok(None);
        };
        Ok(Some(FolderInfo {
            folder: o.obj.clone(),
            name,
            custom_values: custom_values(o.props.get("customValue")),
            children: o
                .props
                .get("childEntity")
                .into_iter()
                .flat_map(|v| v.all("ManagedObjectReference"))
                .filter_map(MoRef::from_element)
                .collect(),
        }))
    }

    /// The names of `objs` (of any managed entity types), in their order.
    pub async fn names(&self, objs: &[MoRef]) -> Result<Vec<String>> {
        let mut kinds: Vec<&str> = objs.iter().map(|o| o.kind.as_str()).collect();
        kinds.sort_unstable();
        kinds.dedup();
        let mut named = std::collections::BTreeMap::new();
        // The property collector matches a spec's type exactly: one read per type.
        for kind in kinds {
            let of_kind: Vec<MoRef> = objs.iter().filter(|o| o.kind == kind).cloned().collect();
            for o in self.properties(&of_kind, kind, &["name"]).await? {
                if let Some(n) = o.text("name") {
                    named.insert(o.obj.clone(), n.to_string());
                }
            }
        }
        Ok(objs
            .iter()
            .map(|o| named.get(o).cloned().unwrap_or_else(|| o.to_string()))
            .collect())
    }

    async fn find_field(&self, cfm: &MoRef, name: &str) -> Result<Option<i32>> {
        let found = self
            .properties(std::slice::from_ref(cfm), "CustomFieldsManager", &["field"])
            .await?;
        let key = found
            .first()
            .and_then(|o| o.props.get("field"))
            .into_iter()
            .flat_map(|v| v.all("CustomFieldDef"))
            .filter(|d| d.child_text("name") == Some(name))
            // A field for one type only would not mark folders and VMs both.
            .filter(|d| {
                d.child_text("managedObjectType")
                    .is_none_or(|t| t.trim().is_empty())
            })
            .find_map(|d| d.child_text("key").and_then(|k| k.trim().parse().ok()));
        Ok(key)
    }

    fn custom_fields_manager(&self) -> Result<MoRef> {
        self.content()
            .custom_fields_manager
            .clone()
            .ok_or_else(|| Error::Protocol {
                method: "SetField".into(),
                message: "this server has no custom fields manager (a vCenter is needed)".into(),
            })
    }
}
