//! `watches.yaml`: created with operator-sdk's header and scaffold marker; each `create api`
//! inserts its entry just above the marker and leaves every other line as the user wrote it.
use crate::Error;

/// The marker as operator-sdk writes it; `#+kubebuilder:scaffold:watch` (older scaffolds)
/// is found too.
pub const MARKER: &str = "# +kubebuilder:scaffold:watch";

pub fn initial() -> String {
    format!("# Use the 'create api' subcommand to add watches to this file.\n{MARKER}\n")
}

/// The entry of a chart-backed kind.
pub fn chart_entry(group: &str, version: &str, kind: &str, chart_dir: &str) -> String {
    format!("- group: {group}\n  version: {version}\n  kind: {kind}\n  chart: {chart_dir}\n")
}

/// `text` with `entry` inserted above the marker line (indented as the marker is).
pub fn insert(text: &str, entry: &str) -> Result<String, Error> {
    let mut out = String::with_capacity(text.len() + entry.len());
    let mut done = false;
    for line in text.split_inclusive('\n') {
        let t = line.trim();
        if !done && t.starts_with('#') && t[1..].trim_start() == "+kubebuilder:scaffold:watch" {
            out.push_str(entry);
            done = true;
        }
        out.push_str(line);
    }
    if done {
        Ok(out)
    } else {
        Err(Error::NoMarker)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_go_above_the_marker_and_the_rest_is_kept() {
        let first = insert(
            &initial(),
            &chart_entry(
                "charts.example.com",
                "v1alpha1",
                "BookStore",
                "helm-charts/book-store",
            ),
        )
        .expect("marker");
        // What the user added by hand stays as written.
        let edited = first.replace(
            "  chart: helm-charts/book-store\n",
            "  chart: helm-charts/book-store\n  reconcilePeriod: 30s # mine\n",
        );
        let second = insert(
            &edited,
            &chart_entry("charts.example.com", "v1", "Shelf", "helm-charts/shelf"),
        )
        .expect("marker");
        assert_eq!(
            second,
            "# Use the 'create api' subcommand to add watches to this file.\n\
             - group: charts.example.com\n  version: v1alpha1\n  kind: BookStore\n  chart: helm-charts/book-store\n  reconcilePeriod: 30s # mine\n\
             - group: charts.example.com\n  version: v1\n  kind: Shelf\n  chart: helm-charts/shelf\n\
             # +kubebuilder:scaffold:watch\n"
        );
    }

    #[test]
    fn the_older_marker_spelling_is_found_and_a_missing_one_is_refused() {
        let old = "- {group: a.b, version: v1, kind: A, chart: c}\n#+kubebuilder:scaffold:watch\n";
        let got = insert(old, "X\n").expect("old marker");
        assert!(got.ends_with("X\n#+kubebuilder:scaffold:watch\n"), "{got}");
        let err = insert("- {group: a.b}\n", "X\n").expect_err("no marker");
        assert!(
            err.to_string().contains("+kubebuilder:scaffold:watch"),
            "{err}"
        );
    }
}
