//! The chart a kind is backed by: read from a directory or a `.tgz` (checked by loading it
//! with bosun's renderer, which refuses what Helm refuses), or a new small chart when only a
//! kind is given. Its files are copied verbatim into `helm-charts/<name>/`.
use std::io::Read;
use std::path::Path;

use serde_json::Value;

use crate::Error;

pub struct ChartSource {
    /// The chart's name (`Chart.yaml`'s `name`): its directory under `helm-charts/`.
    pub name: String,
    /// Files relative to the chart's root.
    pub files: Vec<(String, Vec<u8>)>,
    /// The chart's default values, as JSON: the sample's spec.
    pub values: Value,
}

impl ChartSource {
    /// Loads a chart directory or archive; a chart that does not load is refused.
    pub fn load(path: &Path) -> Result<ChartSource, Error> {
        let err = |message: String| Error::Chart {
            path: path.to_path_buf(),
            message,
        };
        let chart = bosun_helm::render::Chart::load(path).map_err(|e| err(e.to_string()))?;
        // Templates are parsed for the first render: a chart Helm would not parse (or whose
        // values break its schema) is refused; one that needs values (`required`) is not.
        let opts = bosun_helm::render::RenderOptions::new("release-name", "default");
        if let Err(e) = chart.render(&opts) {
            use bosun_helm::render::RenderErrorKind as K;
            if matches!(e.kind, K::Load | K::Parse | K::Schema | K::Values) {
                return Err(err(e.to_string()));
            }
        }
        let name = chart.name().to_string();
        if name.is_empty() || name.contains(['/', '\\']) || name.starts_with('.') {
            return Err(err(format!("its Chart.yaml names it {name:?}")));
        }
        let values = whole_numbers(bosun_helm_operator::crd::data_json(chart.default_values()));
        let files = if path.is_dir() {
            let mut out = Vec::new();
            walk(path, "", &mut out)?;
            out
        } else {
            unpack(path).map_err(err)?
        };
        Ok(ChartSource {
            name,
            files,
            values,
        })
    }

    /// A new chart for `kind` when no `--helm-chart` is given: one Deployment of a web
    /// server and its Service, with the values a user edits first (operator-sdk starts from
    /// `helm create`'s chart; this one is bosun's own and smaller).
    pub fn new_for(kind: &str) -> ChartSource {
        let name = kind.to_lowercase();
        let chart_yaml = format!(
            "apiVersion: v2\nname: {name}\ndescription: A Helm chart for the {kind} kind\ntype: application\nversion: 0.1.0\nappVersion: \"1.27\"\n"
        );
        let values = "replicaCount: 1\nimage:\n  repository: nginx\n  tag: \"1.27\"\n  pullPolicy: IfNotPresent\nservice:\n  type: ClusterIP\n  port: 80\n";
        let deployment = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
  labels:
    app.kubernetes.io/name: {{ .Chart.Name }}
    app.kubernetes.io/instance: {{ .Release.Name }}
spec:
  replicas: {{ .Values.replicaCount }}
  selector:
    matchLabels:
      app.kubernetes.io/name: {{ .Chart.Name }}
      app.kubernetes.io/instance: {{ .Release.Name }}
  template:
    metadata:
      labels:
        app.kubernetes.io/name: {{ .Chart.Name }}
        app.kubernetes.io/instance: {{ .Release.Name }}
    spec:
      containers:
        - name: {{ .Chart.Name }}
          image: "{{ .Values.image.repository }}:{{ .Values.image.tag }}"
          imagePullPolicy: {{ .Values.image.pullPolicy }}
          ports:
            - name: http
              containerPort: 80
"#;
        let service = r#"apiVersion: v1
kind: Service
metadata:
  name: {{ .Release.Name }}
spec:
  type: {{ .Values.service.type }}
  ports:
    - port: {{ .Values.service.port }}
      targetPort: http
      name: http
  selector:
    app.kubernetes.io/name: {{ .Chart.Name }}
    app.kubernetes.io/instance: {{ .Release.Name }}
"#;
        let values_json = serde_json::json!({
            "replicaCount": 1,
            "image": {"repository": "nginx", "tag": "1.27", "pullPolicy": "IfNotPresent"},
            "service": {"type": "ClusterIP", "port": 80},
        });
        ChartSource {
            name,
            files: vec![
                ("Chart.yaml".into(), chart_yaml.into_bytes()),
                ("values.yaml".into(), values.as_bytes().to_vec()),
                (
                    "templates/deployment.yaml".into(),
                    deployment.as_bytes().to_vec(),
                ),
                ("templates/service.yaml".into(), service.as_bytes().to_vec()),
            ],
            values: values_json,
        }
    }
}

/// Helm reads every number of values.yaml as a float; the sample shows `1`, not `1.0`.
fn whole_numbers(v: Value) -> Value {
    match v {
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() < 9.0e15 => Value::from(f as i64),
            _ => Value::Number(n),
        },
        Value::Array(a) => Value::Array(a.into_iter().map(whole_numbers).collect()),
        Value::Object(m) => {
            Value::Object(m.into_iter().map(|(k, v)| (k, whole_numbers(v))).collect())
        }
        other => other,
    }
}

fn walk(dir: &Path, prefix: &str, out: &mut Vec<(String, Vec<u8>)>) -> Result<(), Error> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(Error::io(dir))?
        .filter_map(Result::ok)
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = e.file_name().to_string_lossy().into_owned();
        let rel = if prefix.is_empty() {
            name
        } else {
            format!("{prefix}/{name}")
        };
        let path = e.path();
        if path.is_dir() {
            walk(&path, &rel, out)?;
        } else {
            out.push((rel, std::fs::read(&path).map_err(Error::io(&path))?));
        }
    }
    Ok(())
}

/// The files of a chart archive, relative to its top directory.
fn unpack(path: &Path) -> Result<Vec<(String, Vec<u8>)>, String> {
    let data = std::fs::read(path).map_err(|e| e.to_string())?;
    let mut ar = tar::Archive::new(flate2::read::GzDecoder::new(data.as_slice()));
    let mut out = Vec::new();
    for entry in ar.entries().map_err(|e| e.to_string())? {
        let mut entry = entry.map_err(|e| e.to_string())?;
        if !entry.header().entry_type().is_file() {
            continue;
        }
        let p = entry
            .path()
            .map_err(|e| e.to_string())?
            .to_string_lossy()
            .replace('\\', "/");
        let Some((_, rel)) = p.split_once('/') else {
            continue;
        };
        if rel.is_empty() || rel.split('/').any(|c| c == ".." || c.is_empty()) {
            continue;
        }
        let mut buf = Vec::new();
        entry.read_to_end(&mut buf).map_err(|e| e.to_string())?;
        out.push((rel.to_string(), buf));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chart_files() -> Vec<(&'static str, &'static str)> {
        vec![
            ("Chart.yaml", "apiVersion: v2\nname: tiny\nversion: 1.2.3\n"),
            ("values.yaml", "size: 3\nname: x\nratio: 0.5\n"),
            (
                "templates/cm.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n  size: {{ .Values.size | quote }}\n",
            ),
        ]
    }

    /// A `.tgz` is unpacked below its top directory, as `helm pull` archives are laid out.
    #[test]
    fn an_archive_is_unpacked_into_the_charts_own_files() {
        let dir = tempfile::tempdir().expect("dir");
        let tgz = dir.path().join("tiny-1.2.3.tgz");
        let gz = flate2::write::GzEncoder::new(
            std::fs::File::create(&tgz).expect("create"),
            flate2::Compression::default(),
        );
        let mut ar = tar::Builder::new(gz);
        for (name, text) in chart_files() {
            let mut h = tar::Header::new_gnu();
            h.set_size(text.len() as u64);
            h.set_mode(0o644);
            h.set_cksum();
            ar.append_data(&mut h, format!("tiny/{name}"), text.as_bytes())
                .expect("append");
        }
        ar.into_inner().expect("tar").finish().expect("gz");
        let c = ChartSource::load(&tgz).expect("loads");
        assert_eq!(c.name, "tiny");
        let mut got: Vec<(String, Vec<u8>)> = c.files;
        got.sort();
        let mut want: Vec<(String, Vec<u8>)> = chart_files()
            .into_iter()
            .map(|(n, t)| (n.to_string(), t.as_bytes().to_vec()))
            .collect();
        want.sort();
        assert_eq!(got, want);
        assert_eq!(
            c.values,
            serde_json::json!({"size": 3, "name": "x", "ratio": 0.5}),
            "whole numbers as integers, others kept"
        );
    }

    #[test]
    fn a_chart_without_chart_yaml_is_refused() {
        let dir = tempfile::tempdir().expect("dir");
        std::fs::write(dir.path().join("values.yaml"), "a: 1\n").expect("values");
        let err = ChartSource::load(dir.path())
            .err()
            .expect("refused")
            .to_string();
        assert!(
            err.contains("does not load") && err.contains("Chart.yaml"),
            "{err}"
        );
    }
}
