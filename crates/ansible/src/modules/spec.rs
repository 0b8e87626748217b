//! The modules bosun runs, under every name a role may call them by, with the options each
//! accepts. An option outside these lists is refused when the role is loaded.

/// A module bosun implements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Module {
    K8s,
    K8sInfo,
    K8sStatus,
    K8sEvent,
    K8sScale,
    RequeueAfter,
    SetFact,
    Debug,
    Fail,
    Assert,
    Pause,
    Meta,
    IncludeTasks,
    ImportTasks,
    IncludeRole,
    ImportRole,
    IncludeVars,
    Stat,
    File,
    OsdkMetric,
}

impl Module {
    /// The module a task names (`k8s`, `kubernetes.core.k8s`, `ansible.builtin.debug`, ...).
    pub fn from_name(name: &str) -> Option<Module> {
        let short = [
            "ansible.builtin.",
            "ansible.legacy.",
            "kubernetes.core.",
            "community.kubernetes.",
            "operator_sdk.util.",
            "community.okd.",
        ]
        .iter()
        .find_map(|p| name.strip_prefix(p))
        .unwrap_or(name);
        // A collection-qualified name must come from a collection that has the module.
        let qualified = short.len() != name.len();
        let m = match short {
            "k8s" => Module::K8s,
            "k8s_info" | "k8s_facts" => Module::K8sInfo,
            "k8s_status" => Module::K8sStatus,
            "k8s_event" => Module::K8sEvent,
            "k8s_scale" => Module::K8sScale,
            "requeue_after" => Module::RequeueAfter,
            "set_fact" => Module::SetFact,
            "debug" => Module::Debug,
            "fail" => Module::Fail,
            "assert" => Module::Assert,
            "pause" => Module::Pause,
            "meta" => Module::Meta,
            "include_tasks" => Module::IncludeTasks,
            "import_tasks" => Module::ImportTasks,
            "include_role" => Module::IncludeRole,
            "import_role" => Module::ImportRole,
            "include_vars" => Module::IncludeVars,
            "stat" => Module::Stat,
            "file" => Module::File,
            "osdk_metric" => Module::OsdkMetric,
            _ => return None,
        };
        if qualified {
            let coll = &name[..name.len() - short.len() - 1];
            let ok = match m {
                Module::K8s | Module::K8sInfo | Module::K8sScale => matches!(
                    coll,
                    "kubernetes.core" | "community.kubernetes" | "community.okd"
                ),
                Module::K8sStatus
                | Module::K8sEvent
                | Module::RequeueAfter
                | Module::OsdkMetric => coll == "operator_sdk.util",
                _ => matches!(coll, "ansible.builtin" | "ansible.legacy"),
            };
            if !ok {
                return None;
            }
        }
        Some(m)
    }

    /// The options a module takes (`None`: any key, as `set_fact` takes variable names).
    pub fn options(self) -> Option<&'static [&'static str]> {
        Some(match self {
            Module::K8s => &[
                "state",
                "definition",
                "resource_definition",
                "src",
                "template",
                "namespace",
                "name",
                "kind",
                "api_version",
                "api",
                "version",
                "merge_type",
                "apply",
                "server_side_apply",
                "force",
                "wait",
                "wait_condition",
                "wait_sleep",
                "wait_timeout",
                "generate_name",
                "label_selectors",
                "delete_options",
                "continue_on_error",
            ],
            Module::K8sInfo => &[
                "kind",
                "api_version",
                "api",
                "version",
                "name",
                "namespace",
                "label_selectors",
                "field_selectors",
                "wait",
                "wait_condition",
                "wait_sleep",
                "wait_timeout",
            ],
            Module::K8sStatus => &[
                "api_version",
                "api",
                "version",
                "kind",
                "name",
                "namespace",
                "status",
                "conditions",
                "replace",
                "force",
                "replace_lists",
            ],
            Module::K8sEvent => &[
                "state",
                "name",
                "namespace",
                "message",
                "reason",
                "reportingComponent",
                "type",
                "source",
                "involvedObject",
                "appendTimestamp",
            ],
            Module::K8sScale => &[
                "kind",
                "api_version",
                "api",
                "version",
                "name",
                "namespace",
                "replicas",
                "current_replicas",
                "resource_version",
                "wait",
                "wait_timeout",
                "wait_sleep",
                "label_selectors",
                "resource_definition",
                "src",
            ],
            Module::RequeueAfter => &["time"],
            Module::SetFact => return None,
            Module::Debug => &["msg", "var", "verbosity"],
            Module::Fail => &["msg"],
            Module::Assert => &["that", "fail_msg", "msg", "success_msg", "quiet"],
            Module::Pause => &["seconds", "minutes", "echo"],
            Module::Meta => &["_raw_params"],
            Module::IncludeTasks | Module::ImportTasks => &["_raw_params", "file"],
            Module::IncludeRole | Module::ImportRole => &[
                "name",
                "tasks_from",
                "vars_from",
                "defaults_from",
                "public",
                "allow_duplicates",
                "rolespec_validate",
            ],
            Module::IncludeVars => &["_raw_params", "file", "name"],
            Module::Stat => &[
                "path",
                "dest",
                "name",
                "follow",
                "get_checksum",
                "checksum_algorithm",
                "checksum",
                "checksum_algo",
                "get_mime",
                "get_attributes",
            ],
            Module::File => &["path", "dest", "name", "state", "mode"],
            Module::OsdkMetric => &[
                "name",
                "description",
                "address",
                "counter",
                "gauge",
                "histogram",
                "summary",
            ],
        })
    }

    /// Whether the module takes free-form text (`include_tasks: file.yml`).
    pub fn free_form(self) -> bool {
        matches!(
            self,
            Module::Meta | Module::IncludeTasks | Module::ImportTasks | Module::IncludeVars
        )
    }

    /// Whether a failure of this module kind can come from the cluster (for dependent watches).
    pub fn is_kubernetes(self) -> bool {
        matches!(
            self,
            Module::K8s | Module::K8sInfo | Module::K8sStatus | Module::K8sEvent | Module::K8sScale
        )
    }

    pub fn name(self) -> &'static str {
        match self {
            Module::K8s => "k8s",
            Module::K8sInfo => "k8s_info",
            Module::K8sStatus => "k8s_status",
            Module::K8sEvent => "k8s_event",
            Module::K8sScale => "k8s_scale",
            Module::RequeueAfter => "requeue_after",
            Module::SetFact => "set_fact",
            Module::Debug => "debug",
            Module::Fail => "fail",
            Module::Assert => "assert",
            Module::Pause => "pause",
            Module::Meta => "meta",
            Module::IncludeTasks => "include_tasks",
            Module::ImportTasks => "import_tasks",
            Module::IncludeRole => "include_role",
            Module::ImportRole => "import_role",
            Module::IncludeVars => "include_vars",
            Module::Stat => "stat",
            Module::File => "file",
            Module::OsdkMetric => "osdk_metric",
        }
    }
}

/// Task keywords bosun honours. Others (`become`, `delegate_to`, `notify`, `environment`, ...)
/// would change what the task does; a role using one is refused.
pub const TASK_KEYWORDS: &[&str] = &[
    "name",
    "when",
    "loop",
    "with_items",
    "with_list",
    "with_dict",
    "with_nested",
    "with_together",
    "with_subelements",
    "with_indexed_items",
    "with_sequence",
    "loop_control",
    "register",
    "until",
    "retries",
    "delay",
    "changed_when",
    "failed_when",
    "ignore_errors",
    "vars",
    "no_log",
    "tags",
    "args",
    "block",
    "rescue",
    "always",
    "run_once",
    "any_errors_fatal",
    "collections",
    "throttle",
];

/// Keywords that are no-ops for one `localhost` host and so are accepted as such.
pub const NOOP_KEYWORDS: &[&str] = &[
    "tags",
    "run_once",
    "any_errors_fatal",
    "collections",
    "throttle",
];

/// Ansible task keywords bosun does not honour (refused with their name).
pub const UNSUPPORTED_KEYWORDS: &[&str] = &[
    "action",
    "local_action",
    "async",
    "poll",
    "become",
    "become_user",
    "become_method",
    "become_flags",
    "become_exe",
    "check_mode",
    "connection",
    "debugger",
    "delegate_to",
    "delegate_facts",
    "diff",
    "environment",
    "ignore_unreachable",
    "module_defaults",
    "notify",
    "listen",
    "port",
    "remote_user",
    "timeout",
    "with_fileglob",
    "with_first_found",
    "with_random_choice",
    "with_lines",
    "with_flattened",
    "with_inventory_hostnames",
    "with_k8s",
    "with_template",
    "with_file",
    "with_env",
    "apply",
    "handlers",
    "vars_files",
    "vars_prompt",
];
