//! Loading a chart from a directory or a `.tgz`, as Helm's `loader` does: files sorted
//! into `Chart.yaml`, `values.yaml`, `values.schema.json`, `templates/`, subcharts under
//! `charts/` (directories and archives, `_`- and `.`-prefixed ones skipped), and the
//! rest as `.Files`; `.helmignore` applied to directories; a UTF-8 BOM dropped.
use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use super::ignore::Rules;
use super::metadata::{self, Metadata};
use crate::value::Data;

/// Files larger than this are refused (Helm's `MaxDecompressedFileSize`).
const MAX_FILE: u64 = 5 << 20;
/// An archive may not unpack to more than this (Helm's `MaxDecompressedChartSize`).
const MAX_ARCHIVE: u64 = 100 << 20;

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{0}")]
    Io(String),
    #[error("{0}")]
    Invalid(String),
}

/// One chart as loaded, before any values are applied.
#[derive(Debug)]
pub struct ChartNode {
    pub meta: Metadata,
    pub values: Data,
    pub schema: Option<Arc<[u8]>>,
    /// `templates/...` files.
    pub templates: Vec<(String, Arc<str>)>,
    /// Everything else (`.Files`), including `crds/`.
    pub files: Vec<(String, Arc<[u8]>)>,
    /// Subcharts found under `charts/`, by name.
    pub deps: Vec<Arc<ChartNode>>,
}

/// Loads a chart directory or archive.
pub fn load(path: &Path) -> Result<ChartNode, LoadError> {
    let meta =
        std::fs::metadata(path).map_err(|e| LoadError::Io(format!("{}: {e}", path.display())))?;
    if meta.is_dir() {
        load_dir(path)
    } else {
        let data =
            std::fs::read(path).map_err(|e| LoadError::Io(format!("{}: {e}", path.display())))?;
        load_archive(&data)
    }
}

fn load_dir(root: &Path) -> Result<ChartNode, LoadError> {
    let rules = match std::fs::read_to_string(root.join(".helmignore")) {
        Ok(t) => Rules::parse(&t).map_err(LoadError::Invalid)?,
        Err(_) => Rules::parse("").map_err(LoadError::Invalid)?,
    };
    let mut files = Vec::new();
    walk(root, "", &rules, &mut files)?;
    load_files(files)
}

fn walk(
    dir: &Path,
    prefix: &str,
    rules: &Rules,
    out: &mut Vec<(String, Vec<u8>)>,
) -> Result<(), LoadError> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| LoadError::Io(format!("{}: {e}", dir.display())))?
        .filter_map(Result::ok)
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = e.file_name().to_string_lossy().into_owned();
        let rel = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}/{name}")
        };
        let path = e.path();
        let md = std::fs::metadata(&path)
            .map_err(|err| LoadError::Io(format!("{}: {err}", path.display())))?;
        if md.is_dir() {
            if rules.ignore(&rel, true) {
                continue;
            }
            walk(&path, &rel, rules, out)?;
            continue;
        }
        if rules.ignore(&rel, false) {
            continue;
        }
        if !md.is_file() {
            return Err(LoadError::Invalid(format!(
                "cannot load irregular file {} as it has file mode type bits set",
                path.display()
            )));
        }
        if md.len() > MAX_FILE {
            return Err(LoadError::Invalid(format!(
                "chart file {rel:?} is larger than the maximum file size {MAX_FILE}"
            )));
        }
        let data = std::fs::read(&path)
            .map_err(|err| LoadError::Io(format!("{}: {err}", path.display())))?;
        out.push((rel, data));
    }
    Ok(())
}

/// Loads a gzipped tar whose entries sit under one top directory.
pub fn load_archive(data: &[u8]) -> Result<ChartNode, LoadError> {
    let gz = flate2::read::GzDecoder::new(data);
    let mut ar = tar::Archive::new(gz.take(MAX_ARCHIVE + 1));
    let mut files = Vec::new();
    let mut total: u64 = 0;
    let entries = ar
        .entries()
        .map_err(|e| LoadError::Invalid(format!("cannot read archive: {e}")))?;
    for entry in entries {
        let mut entry =
            entry.map_err(|e| LoadError::Invalid(format!("cannot read archive: {e}")))?;
        if !entry.header().entry_type().is_file() {
            continue;
        }
        let path = entry
            .path()
            .map_err(|e| LoadError::Invalid(format!("bad archive path: {e}")))?
            .to_string_lossy()
            .replace('\\', "/");
        let mut parts = path.splitn(2, '/');
        let _top = parts.next();
        let Some(rel) = parts.next() else { continue };
        if rel.is_empty() || rel.split('/').any(|p| p == "..") {
            continue;
        }
        let size = entry.header().size().unwrap_or(0);
        if size > MAX_FILE {
            return Err(LoadError::Invalid(format!(
                "chart file {rel:?} is larger than the maximum file size {MAX_FILE}"
            )));
        }
        total += size;
        if total > MAX_ARCHIVE {
            return Err(LoadError::Invalid(
                "chart exceeds maximum decompressed size".into(),
            ));
        }
        let mut buf = Vec::with_capacity(size as usize);
        entry
            .read_to_end(&mut buf)
            .map_err(|e| LoadError::Invalid(format!("cannot read archive: {e}")))?;
        files.push((rel.to_string(), buf));
    }
    if files.is_empty() {
        return Err(LoadError::Invalid("no files in chart archive".into()));
    }
    load_files(files)
}

fn strip_bom(mut d: Vec<u8>) -> Vec<u8> {
    if d.starts_with(&[0xEF, 0xBB, 0xBF]) {
        d.drain(..3);
    }
    d
}

fn yaml(name: &str, data: &[u8]) -> Result<Data, LoadError> {
    let text = String::from_utf8_lossy(data);
    crate::funcs::helm::yaml_data(&text)
        .map_err(|e| LoadError::Invalid(format!("cannot load {name}: {e}")))
}

/// Helm's `LoadFiles`.
pub fn load_files(files: Vec<(String, Vec<u8>)>) -> Result<ChartNode, LoadError> {
    let files: Vec<(String, Vec<u8>)> = files.into_iter().map(|(n, d)| (n, strip_bom(d))).collect();
    let chart_yaml = files.iter().find(|(n, _)| n == "Chart.yaml");
    let Some((_, cy)) = chart_yaml else {
        return Err(LoadError::Invalid("Chart.yaml file is missing".into()));
    };
    let cdata = yaml("Chart.yaml", cy)?;
    let mut meta = Metadata::from_data(&cdata);
    if meta.api_version.is_empty() {
        meta.api_version = "v1".into();
    }
    let mut node = ChartNode {
        meta,
        values: Data::Map(Default::default()),
        schema: None,
        templates: Vec::new(),
        files: Vec::new(),
        deps: Vec::new(),
    };
    let mut subcharts: std::collections::BTreeMap<String, Vec<(String, Vec<u8>)>> =
        Default::default();
    for (name, data) in files {
        match name.as_str() {
            "Chart.yaml" | "Chart.lock" | "requirements.lock" => {}
            "values.yaml" => {
                node.values = match yaml("values.yaml", &data)? {
                    Data::Null => Data::Map(Default::default()),
                    d @ Data::Map(_) => d,
                    _ => {
                        return Err(LoadError::Invalid(
                            "cannot load values.yaml: error unmarshaling JSON: while decoding JSON: json: cannot unmarshal array into Go value of type map[string]interface {}".into(),
                        ))
                    }
                };
            }
            "values.schema.json" => node.schema = Some(Arc::from(data)),
            "requirements.yaml" => {
                let d = yaml("requirements.yaml", &data)?;
                node.meta.dependencies =
                    metadata::dependencies(d.as_map().and_then(|m| m.get("dependencies")));
                if node.meta.api_version == "v1" {
                    node.files.push((name, Arc::from(data)));
                }
            }
            n if n.starts_with("templates/") => {
                node.templates.push((
                    name.clone(),
                    Arc::from(String::from_utf8_lossy(&data).as_ref()),
                ));
            }
            n if n.starts_with("charts/") => {
                if n.ends_with(".prov") {
                    node.files.push((name, Arc::from(data)));
                    continue;
                }
                let rest = &n["charts/".len()..];
                let cname = rest.split('/').next().unwrap_or("").to_string();
                subcharts
                    .entry(cname)
                    .or_default()
                    .push((rest.to_string(), data));
            }
            _ => node.files.push((name, Arc::from(data))),
        }
    }
    if node.meta.name.is_empty() {
        return Err(LoadError::Invalid(
            "validation: chart.metadata.name is required".into(),
        ));
    }
    if node.meta.version.is_empty() {
        return Err(LoadError::Invalid(
            "validation: chart.metadata.version is required".into(),
        ));
    }
    for (cname, files) in subcharts {
        if cname.starts_with('_') || cname.starts_with('.') {
            continue;
        }
        let sub = if cname.ends_with(".tgz") {
            let Some((fname, data)) = files.into_iter().next() else {
                continue;
            };
            if fname != cname {
                return Err(LoadError::Invalid(format!(
                    "error unpacking subchart tar in {}: expected {cname}, got {fname}",
                    node.meta.name
                )));
            }
            load_archive(&data)
        } else {
            let inner: Vec<(String, Vec<u8>)> = files
                .into_iter()
                .filter_map(|(n, d)| n.split_once('/').map(|(_, r)| (r.to_string(), d)))
                .collect();
            load_files(inner)
        };
        let sub = sub.map_err(|e| {
            LoadError::Invalid(format!(
                "error unpacking subchart {cname} in {}: {e}",
                node.meta.name
            ))
        })?;
        node.deps.push(Arc::new(sub));
    }
    Ok(node)
}
