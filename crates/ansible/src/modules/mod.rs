//! The modules a task can call. Each takes its templated arguments and returns the result
//! Ansible would register (`Err`: the task fails with that message); side effects on the
//! run (facts, requeue, status for the host) go through [`Effects`].
pub mod apply;
pub mod basic;
pub mod files;
pub mod k8s;
pub mod k8s_event;
pub mod k8s_info;
pub mod k8s_scale;
pub mod k8s_status;
pub mod noop;
pub mod spec;
pub mod validate;

use std::sync::Arc;
use std::time::Duration;

use minijinja::value::Value;
use serde_json::Value as Json;

pub use spec::Module;

use crate::engine::outcome_types::StatusRequest;
use crate::engine::RunContext;
use crate::template::Scope;

/// What a module asks of the run beyond its result.
#[derive(Debug, Default)]
pub struct Effects {
    pub facts: Vec<(String, Value)>,
    pub requeue: Option<Duration>,
    pub status: Option<StatusRequest>,
    pub events: Vec<Json>,
    pub touched: Vec<(String, String)>,
}

impl Effects {
    pub fn merge(&mut self, other: Effects) {
        self.facts.extend(other.facts);
        if other.requeue.is_some() {
            self.requeue = other.requeue;
        }
        if let Some(s) = other.status {
            let cur = self.status.get_or_insert_with(Default::default);
            k8s_status::merge_request(cur, s);
        }
        self.events.extend(other.events);
        self.touched.extend(other.touched);
    }
}

/// Arguments as a JSON object.
pub(crate) fn json_args(args: &Value) -> serde_json::Map<String, Json> {
    match crate::template::value::to_json(args) {
        Ok(Json::Object(m)) => m,
        _ => serde_json::Map::new(),
    }
}

pub(crate) fn client(ctx: &RunContext) -> Result<&kube::Client, String> {
    ctx.client
        .as_ref()
        .ok_or_else(|| "this module needs a Kubernetes client".to_string())
}

pub async fn call(
    module: Module,
    args: &Value,
    scope: &Arc<Scope>,
    ctx: &RunContext,
    fx: &mut Effects,
) -> Result<Json, String> {
    match module {
        Module::SetFact => basic::set_fact(args, fx),
        Module::Debug => basic::debug(args, scope),
        Module::Fail => basic::fail(args),
        Module::Assert => basic::assert(args, scope),
        Module::Pause => basic::pause(args, ctx).await,
        Module::RequeueAfter => basic::requeue_after(args, fx),
        Module::K8s => k8s::run(&json_args(args), scope, ctx, fx).await,
        Module::K8sInfo => k8s_info::run(&json_args(args), ctx).await,
        Module::K8sStatus => k8s_status::run(&json_args(args), ctx, fx).await,
        Module::K8sEvent => k8s_event::run(&json_args(args), ctx, fx).await,
        Module::K8sScale => k8s_scale::run(&json_args(args), ctx, fx).await,
        Module::Stat => files::stat(&json_args(args)),
        Module::File => files::file(&json_args(args)),
        Module::OsdkMetric => Ok(osdk_metric(&json_args(args), ctx)),
        Module::Meta
        | Module::IncludeTasks
        | Module::ImportTasks
        | Module::IncludeRole
        | Module::ImportRole
        | Module::IncludeVars => Err(format!("{} is not a module call", module.name())),
    }
}

/// `operator_sdk.util.osdk_metric`: the request goes to the run's metrics (see
/// [`crate::metrics`]); a refused one fails the task with the handler's message and 400, as
/// the module reports an HTTP error.
fn osdk_metric(a: &serde_json::Map<String, Json>, ctx: &RunContext) -> Json {
    let text = |k: &str| {
        a.get(k)
            .and_then(Json::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let opts = |k: &str| a.get(k).and_then(Json::as_object).cloned();
    let req = crate::metrics::Request {
        name: text("name"),
        description: text("description"),
        counter: opts("counter"),
        gauge: opts("gauge"),
        histogram: opts("histogram"),
        summary: opts("summary"),
    };
    if req.name.is_empty() || !a.contains_key("description") {
        return serde_json::json!({"changed": false, "failed": true,
            "msg": "missing required arguments: description, name"});
    }
    match ctx.metrics.handle(&req) {
        Ok(()) => serde_json::json!({"changed": true}),
        Err(e) => {
            serde_json::json!({"changed": false, "failed": true, "msg": format!("{e}\n"), "status_code": 400})
        }
    }
}
