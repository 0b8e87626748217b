//! Errors, worded as the imitated engine words them, with the real position alongside.

use crate::syntax::{Stage, SyntaxError};
use crate::value::Mark;

/// What went wrong, broadly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The text is not well-formed YAML (reader, scanner or parser).
    Syntax,
    /// Well-formed YAML that the schema cannot turn into values (unknown anchor, bad merge,
    /// unconstructible tag, unhashable key, ...).
    Construct,
    /// Input refused by a safety bound: nesting depth or alias expansion.
    Limit,
    /// A value JSON cannot carry (go-yaml's `json: unsupported value: +Inf`).
    Json,
}

/// An error with the engine's own message and, where known, where it happened.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct Error {
    kind: ErrorKind,
    message: String,
    mark: Option<Mark>,
}

impl Error {
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>, mark: Option<Mark>) -> Error {
        Error {
            kind,
            message: message.into(),
            mark,
        }
    }

    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The message exactly as the imitated engine prints it (go-yaml: `yaml: line 3: ...`).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Where the problem is, 1-based. go-yaml's own message may name a different line (it
    /// counts parser-error lines from 0); this mark is always the real position.
    pub fn mark(&self) -> Option<Mark> {
        self.mark
    }

    /// go-yaml v2's wording (`yaml.v2` `parser.fail`): scanner errors name the 1-based line,
    /// parser errors the 0-based one, and nothing is named when that number is 0.
    pub(crate) fn from_syntax_goyaml(e: &SyntaxError) -> Error {
        let problem_line = match e.stage {
            // go-yaml never fills the problem mark for reader errors.
            Stage::Reader => 0,
            _ => e.problem_mark.line,
        };
        let line = if problem_line != 0 {
            if e.stage == Stage::Scanner {
                problem_line + 1
            } else {
                problem_line
            }
        } else {
            match (e.stage, e.context_mark) {
                (Stage::Reader, _) => 0,
                (_, Some(m)) => m.line,
                (_, None) => 0,
            }
        };
        let message = if line != 0 {
            format!("yaml: line {line}: {}", e.problem)
        } else {
            format!("yaml: {}", e.problem)
        };
        Error::new(
            ErrorKind::Syntax,
            message,
            Some(Mark::from_pos(e.problem_mark)),
        )
    }

    /// PyYAML's `MarkedYAMLError` text for a string input (`in "<unicode string>"`).
    pub(crate) fn from_syntax_pyyaml(e: &SyntaxError) -> Error {
        if e.stage == Stage::Reader {
            let message = format!(
                "unacceptable character #x{:04x}: {}\n  in \"<unicode string>\", position {}",
                e.value.unwrap_or(0),
                e.problem,
                e.problem_mark.index
            );
            return Error::new(
                ErrorKind::Syntax,
                message,
                Some(Mark::from_pos(e.problem_mark)),
            );
        }
        let message = pyyaml_marked(
            e.context,
            e.context_mark.map(Mark::from_pos),
            &e.problem,
            Some(Mark::from_pos(e.problem_mark)),
        );
        Error::new(
            ErrorKind::Syntax,
            message,
            Some(Mark::from_pos(e.problem_mark)),
        )
    }
}

/// `MarkedYAMLError.__str__`: the context mark is printed only when it differs from the
/// problem mark.
pub(crate) fn pyyaml_marked(
    context: Option<&str>,
    context_mark: Option<Mark>,
    problem: &str,
    problem_mark: Option<Mark>,
) -> String {
    let mut lines: Vec<String> = Vec::new();
    if let Some(c) = context {
        lines.push(c.to_string());
        if let Some(cm) = context_mark {
            if problem_mark != Some(cm) {
                lines.push(mark_line(cm));
            }
        }
    }
    lines.push(problem.to_string());
    if let Some(pm) = problem_mark {
        lines.push(mark_line(pm));
    }
    lines.join("\n")
}

fn mark_line(m: Mark) -> String {
    format!(
        "  in \"<unicode string>\", line {}, column {}",
        m.line, m.col
    )
}
