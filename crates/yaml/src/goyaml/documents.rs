//! Splitting a multi-document file the way Helm v4 reads values files: the Kubernetes
//! `YAMLReader` (k8s.io/apimachinery `util/yaml`), whose documents are then read one by one
//! with [`super::yaml_to_json`].

use crate::error::ErrorKind;
use crate::Error;

/// The documents of `src` as `YAMLReader.Read` returns them: lines are re-joined with `\n`
/// (so a missing final newline is added and `\r\n` becomes `\n`), a line starting with `---`
/// ends a document and may be followed only by spaces or a comment, and empty documents are
/// skipped.
pub fn split_documents(src: &str) -> Result<Vec<String>, Error> {
    let mut docs = Vec::new();
    let mut buffer = String::new();
    let mut rest = src;
    while !rest.is_empty() {
        let (line, next) = match rest.find('\n') {
            Some(i) => (&rest[..i], &rest[i + 1..]),
            None => (rest, ""),
        };
        rest = next;
        // bufio.Reader.ReadLine drops the line ending, "\r\n" included.
        let line = line.strip_suffix('\r').unwrap_or(line);
        if let Some(after) = line.strip_prefix("---") {
            let trimmed = after.trim();
            if !trimmed.is_empty() && !trimmed.starts_with('#') {
                return Err(Error::new(
                    ErrorKind::Syntax,
                    format!("invalid Yaml document separator: {trimmed}"),
                    None,
                ));
            }
            if !buffer.is_empty() {
                docs.push(std::mem::take(&mut buffer));
            }
            continue;
        }
        buffer.push_str(line);
        buffer.push('\n');
    }
    if !buffer.is_empty() {
        docs.push(buffer);
    }
    Ok(docs)
}

#[cfg(test)]
mod tests {
    use super::split_documents;

    #[test]
    fn splits_like_yaml_reader() {
        assert_eq!(
            split_documents("a: 1\n---\nb: 2"),
            Ok(vec!["a: 1\n".into(), "b: 2\n".into()])
        );
        assert_eq!(
            split_documents("---\na: 1\r\n--- # c\n"),
            Ok(vec!["a: 1\n".into()])
        );
        assert_eq!(split_documents(""), Ok(vec![]));
        assert!(split_documents("--- {a: 1}\n").is_err());
    }
}
