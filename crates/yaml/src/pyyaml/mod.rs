//! PyYAML as Ansible uses it (placeholder until the PyYAML side lands).

use crate::{Error, Node};

pub(crate) fn load_all(_src: &str) -> Result<Vec<Node>, Error> {
    Err(Error::new(
        crate::error::ErrorKind::Syntax,
        "PyYAML schema not available yet",
        None,
    ))
}
