"""Helm's own engine (libhelm, Helm v4, from PyPI helm-python-sdk) as the oracle for go-yaml v2.

Reads one JSON request on stdin and answers on stdout, so a whole batch costs one process:

  {"to_yaml": [value, ...],        -> {{ toYaml . }} for each value (values pass as JSON, so
                                      numbers are float64, as with `helm template -f`)
   "from_yaml": [text, ...],       -> {{ fromYaml . | toJson }} for each text
   "values_files": [text, ...]}    -> a chart whose values.yaml is the text, loaded with
                                      Chart.load_archive: the values as libhelm's JSON, or the
                                      load error

Answer: {"to_yaml": [text, ...], "from_yaml": [json text, ...],
         "values_files": [{"json": text} | {"error": text}, ...]}
"""
import io
import json
import sys
import tarfile

import helm_python as helm
from helm_python import _native


def chart_archive(values_yaml, templates):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        def add(name, data):
            raw = data.encode("utf-8", "surrogatepass")
            info = tarfile.TarInfo("c/" + name)
            info.size = len(raw)
            tf.addfile(info, io.BytesIO(raw))

        add("Chart.yaml", "apiVersion: v2\nname: c\nversion: 0.1.0\n")
        add("values.yaml", values_yaml)
        for name, text in templates.items():
            add("templates/" + name, text)
    return buf.getvalue()


# Each case renders as one JSON string on its own line; toJson escapes every newline.
RANGE_TO_YAML = '{{- range .Values.cases }}{{ toYaml . | toJson }}{{ "\\n" }}{{- end }}'
RANGE_FROM_YAML = '{{- range .Values.cases }}{{ fromYaml . | toJson | toJson }}{{ "\\n" }}{{- end }}'


def render_lines(template, cases):
    if not cases:
        return []
    chart = helm.Chart.load_archive(chart_archive("", {"t.yaml": template}))
    try:
        out = chart.render({"cases": cases})["c/templates/t.yaml"]
    finally:
        chart.close()
    lines = out.split("\n")
    assert lines[-1] == "", "rendered output must end with a newline"
    return [json.loads(line) for line in lines[:-1]]


def load_values(text):
    try:
        chart = helm.Chart.load_archive(chart_archive(text, {}))
    except Exception as e:  # the load error is the answer
        return {"error": str(e)}
    try:
        return {"json": _native.call_string("helm_chart_values", chart._raw())}
    finally:
        chart.close()


def main():
    request = json.load(sys.stdin)
    answer = {
        "to_yaml": render_lines(RANGE_TO_YAML, request.get("to_yaml", [])),
        "from_yaml": render_lines(RANGE_FROM_YAML, request.get("from_yaml", [])),
        "values_files": [load_values(t) for t in request.get("values_files", [])],
    }
    json.dump(answer, sys.stdout)


if __name__ == "__main__":
    main()
