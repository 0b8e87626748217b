//! Waiting for a task: its `info` read through the property collector until it succeeds or
//! fails, polling at a growing interval, within the client's task bound.
use std::time::Duration;

use crate::client::Client;
use crate::error::{Error, Result};
use crate::soap::{self, fault_type};
use crate::types::MoRef;
use crate::xml::Element;

const FIRST_POLL: Duration = Duration::from_millis(20);
const MAX_POLL: Duration = Duration::from_secs(1);

impl Client {
    /// Calls a `*_Task` method and waits for its task; returns the task's result (a managed
    /// object reference for a clone), or the task's fault as an error.
    pub(crate) async fn run_task(
        &self,
        method: &str,
        this: &MoRef,
        params: &str,
    ) -> Result<Option<MoRef>> {
        let task = self
            .call(method, this, params, |r| soap::returned_ref(method, &r))
            .await?;
        self.wait_task(method, &task).await
    }

    /// Waits until `task` has finished.
    pub async fn wait_task(&self, method: &str, task: &MoRef) -> Result<Option<MoRef>> {
        let bound = self.task_timeout();
        let deadline = tokio::time::Instant::now() + bound;
        let mut interval = FIRST_POLL;
        loop {
            let found = self
                .properties(std::slice::from_ref(task), "Task", &["info"])
                .await?;
            let info = found.first().and_then(|o| o.props.get("info"));
            match info.and_then(|i| i.child_text("state")) {
                Some("success") => {
                    return Ok(info
                        .and_then(|i| i.child("result"))
                        .and_then(MoRef::from_element))
                }
                Some("error") => return Err(task_fault(method, info)),
                _ => {}
            }
            if tokio::time::Instant::now() + interval > deadline {
                return Err(Error::TaskTimeout {
                    task: task.value.clone(),
                    method: method.to_string(),
                    secs: bound.as_secs(),
                });
            }
            tokio::time::sleep(interval).await;
            interval = (interval * 2).min(MAX_POLL);
        }
    }
}

/// A failed task's `info.error` (a `LocalizedMethodFault`) as an error.
fn task_fault(method: &str, info: Option<&Element>) -> Error {
    let error = info.and_then(|i| i.child("error"));
    let fault = error.and_then(|e| e.child("fault"));
    let type_name = fault
        .map(fault_type)
        .unwrap_or_else(|| "TaskFailed".to_string());
    let message = error
        .and_then(|e| e.child_text("localizedMessage"))
        .unwrap_or_default()
        .trim()
        .to_string();
    soap::fault_error(method, &type_name, soap::with_details(message, fault))
}
