"""Renders a Helm chart offline with Helm's own engine (helm-python-sdk binds libhelm) and
prints the objects as a JSON list: templates plus the chart's crds/ directory."""
import json
import sys

import helm_python as helm
import yaml

chart_dir, values_json, namespace = sys.argv[1], sys.argv[2], sys.argv[3]
chart = helm.Chart.load(chart_dir)
rendered = chart.render(json.loads(values_json), name="bosun", namespace=namespace, is_install=True)
objects = []
for path in sorted(rendered):
    objects.extend(d for d in yaml.safe_load_all(rendered[path]) if d)
for crd in chart.crds:
    objects.extend(d for d in yaml.safe_load_all(crd.get("data", "")) if d)
print(json.dumps(objects))
