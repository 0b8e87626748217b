//! Execution errors, carried as Go prints them so Helm's post-processing (and a reader
//! used to Helm) sees the same text: `template: FILE:LINE:COL: executing "NAME" at
//! <CONTEXT>: MESSAGE`, nested through `error calling include: ...`.

/// Why execution stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// A template error, as Go reports it.
    Exec,
    /// A hard limit on hostile templates (output size, loop length, recursion...).
    Limit,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{msg}")]
pub struct ExecError {
    /// The full Go error text.
    pub msg: String,
    pub kind: ErrorKind,
}

impl ExecError {
    pub fn exec(msg: String) -> ExecError {
        ExecError {
            msg,
            kind: ErrorKind::Exec,
        }
    }
    pub fn limit(msg: String) -> ExecError {
        ExecError {
            msg,
            kind: ErrorKind::Limit,
        }
    }
}

/// What a template function can fail with.
#[derive(Debug, Clone)]
pub enum FnError {
    /// A Go error; the evaluator adds `error calling NAME: `.
    Msg(String),
    /// An error from a nested template (`include`, `tpl`), kept as text in the chain.
    Nested(ExecError),
}

impl From<String> for FnError {
    fn from(s: String) -> FnError {
        FnError::Msg(s)
    }
}

impl From<&str> for FnError {
    fn from(s: &str) -> FnError {
        FnError::Msg(s.to_string())
    }
}

impl From<ExecError> for FnError {
    fn from(e: ExecError) -> FnError {
        FnError::Nested(e)
    }
}

/// Helm marks `required` and `fail` messages so it can print them alone.
pub const HELM_ERR_START: &str = "HELM_ERR_START";
pub const HELM_ERR_END: &str = "HELM_ERR_END";

pub fn helm_wrap(msg: &str) -> String {
    format!("{HELM_ERR_START}{msg}{HELM_ERR_END}")
}
