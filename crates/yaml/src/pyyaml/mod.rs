//! PyYAML 6 as Ansible uses it.
//!
//! * Reading is `yaml.load_all(src, Loader=CSafeLoader)`: libyaml 0.2.5's parser (the
//!   libyaml dialect of the shared scanner), PyYAML's composer (a repeated anchor
//!   is an error) and SafeConstructor ([`Schema::PyYaml`](crate::Schema::PyYaml) resolution:
//!   `y`/`n` stay strings, `1:20` is 80, dates are timestamps, `=` cannot be constructed).
//!   Error messages are PyYAML's `str(exc)`, with marks `in "<unicode string>", line L,
//!   column C`; [`crate::Error::mark`] has the position for callers that name the file.
//! * Writing is [`dump`]: SafeRepresenter and the libyaml emitter that `CSafeDumper` (and so
//!   Ansible's `AnsibleDumper`) uses: no `...` after a bare scalar, characters outside the
//!   Basic Multilingual Plane escaped. The pure-Python `yaml.Dumper` differs there.

mod binary;
mod construct;
mod number;
mod pydict;
mod pystr;
mod python_order;
mod represent;
mod resolve;
mod scalars;

use crate::compose::{AnchorRule, ComposeError, Composer};
use crate::error::{pyyaml_marked, ErrorKind};
use crate::syntax::parser::Parser;
use crate::syntax::Dialect;
use crate::value::{Mark, Node};
use crate::{Error, MAX_DEPTH};

pub use represent::{dump, DumpOptions};

/// Every document of `src` as `yaml.load_all(src, Loader=yaml.CSafeLoader)` builds it.
pub(crate) fn load_all(src: &str) -> Result<Vec<Node>, Error> {
    let mut composer = Composer::new(Parser::new(src, Dialect::LibYaml), AnchorRule::Refuse);
    let mut docs = Vec::new();
    while let Some(doc) = composer.next_document().map_err(compose_error)? {
        docs.push(construct::Constructor::new(&doc).construct_document()?);
    }
    Ok(docs)
}

fn compose_error(e: ComposeError) -> Error {
    match e {
        ComposeError::Syntax(e) => Error::from_syntax_pyyaml(&e),
        // libyaml's composer in PyYAML's C extension does not name the anchor.
        ComposeError::UndefinedAlias { at, .. } => {
            let mark = Mark::from_pos(at);
            Error::new(
                ErrorKind::Construct,
                pyyaml_marked(None, None, "found undefined alias", Some(mark)),
                Some(mark),
            )
        }
        ComposeError::DuplicateAnchor { first, second, .. } => {
            let (first, second) = (Mark::from_pos(first), Mark::from_pos(second));
            Error::new(
                ErrorKind::Construct,
                pyyaml_marked(
                    Some("found duplicate anchor; first occurrence"),
                    Some(first),
                    "second occurrence",
                    Some(second),
                ),
                Some(second),
            )
        }
        ComposeError::TooDeep { at } => Error::new(
            ErrorKind::Limit,
            format!("exceeded max depth of {MAX_DEPTH}"),
            Some(Mark::from_pos(at)),
        ),
    }
}
