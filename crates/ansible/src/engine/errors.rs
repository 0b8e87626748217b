//! Ansible's words for a task that fails before its module runs: an undefined variable in
//! the task's arguments is reported by ansible-core 2.18 with the task's position in its
//! file and the offending lines, and ansible-operator puts that whole text in the CR's
//! `Failure` condition (`peer_ansible_contract` compares the two).
use crate::role::Loc;

/// A variable the arguments needed is undefined (`err`: `'x' is undefined`).
pub fn undefined_in_args(loc: &Loc, err: &str) -> String {
    let mut msg = format!("The task includes an option with an undefined variable.. {err}\n\n");
    msg.push_str(&position_details(loc));
    msg
}

/// What ansible-core appends to an error about a YAML object: where it is and, when the
/// file can be read, the line before it, its line and an arrow at its column, and the hint
/// about unquoted templates when the line holds one. Not reproduced (left out rather than
/// guessed): the layout for a line before it in `k=v` shorthand, and the hints about
/// tabs, colons and quotes, which need the line to look malformed.
fn position_details(loc: &Loc) -> String {
    let file = loc.file.display();
    let mut out = format!(
        "The error appears to be in '{file}': line {}, column {}, but may\n\
         be elsewhere in the file depending on the exact syntax problem.\n",
        loc.line, loc.col
    );
    let Ok(text) = std::fs::read_to_string(&*loc.file) else {
        out.push_str("\n(could not open file to display line)");
        return out;
    };
    // Python's readlines(): lines keep their ends, so a blank line is "\n", never "".
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    if lines.is_empty() || loc.line == 0 {
        return out;
    }
    let mut i = (loc.line - 1).min(lines.len() - 1);
    while lines[i].trim().is_empty() {
        if i == 0 {
            return out;
        }
        i -= 1;
    }
    let target = lines[i];
    let prev = if i > 0 { lines[i - 1] } else { "" };
    let arrow = format!("{}^ here", " ".repeat(loc.col.saturating_sub(1)));
    out.push_str(&format!(
        "\nThe offending line appears to be:\n\n{}\n{}\n{arrow}\n",
        prev.trim_end(),
        target.trim_end()
    ));
    // ansible-core's test, `or` and all: any line with a template gets the hint.
    if target.contains("{{")
        && target.contains("}}")
        && (!target.contains("\"{{") || !target.contains("'{{"))
    {
        out.push_str(UNQUOTED_TEMPLATE_HINT);
    }
    out
}

const UNQUOTED_TEMPLATE_HINT: &str = "\
We could be wrong, but this one looks like it might be an issue with
missing quotes. Always quote template expression brackets when they
start a value. For instance:

    with_items:
      - {{ foo }}

Should be written as:

    with_items:
      - \"{{ foo }}\"
";

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;
    use std::sync::Arc;

    fn at(text: &str, line: usize, col: usize) -> (tempfile::TempDir, Loc) {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("main.yml");
        std::fs::write(&file, text).expect("write");
        (
            dir,
            Loc {
                file: Arc::new(file),
                line,
                col,
            },
        )
    }

    #[test]
    fn the_task_line_the_one_before_and_an_arrow() {
        let (_d, loc) = at("- debug: {msg: a}\n\n- name: read it\n  debug:\n", 3, 3);
        let f = loc.file.display().to_string();
        assert_eq!(
            undefined_in_args(&loc, "'x' is undefined"),
            format!(
                "The task includes an option with an undefined variable.. 'x' is undefined\n\n\
                 The error appears to be in '{f}': line 3, column 3, but may\n\
                 be elsewhere in the file depending on the exact syntax problem.\n\n\
                 The offending line appears to be:\n\n\n- name: read it\n  ^ here\n"
            )
        );
    }

    #[test]
    fn a_templated_task_line_gets_the_quoting_hint() {
        let (_d, loc) = at("- name: \"make {{ x }}\"\n  debug:\n", 1, 3);
        let m = undefined_in_args(&loc, "'x' is undefined");
        assert!(
            m.ends_with("  ^ here\nWe could be wrong, but this one looks like it might be an issue with\nmissing quotes. Always quote template expression brackets when they\nstart a value. For instance:\n\n    with_items:\n      - {{ foo }}\n\nShould be written as:\n\n    with_items:\n      - \"{{ foo }}\"\n"),
            "{m}"
        );
    }

    #[test]
    fn an_unreadable_file_is_said() {
        let loc = Loc {
            file: Arc::new(PathBuf::from("/nonexistent/main.yml")),
            line: 1,
            col: 3,
        };
        assert!(undefined_in_args(&loc, "'x' is undefined")
            .ends_with("syntax problem.\n\n(could not open file to display line)"));
    }
}
