"""Helm's own engine (libhelm via helm-python-sdk) as an oracle for bosun's renderer.

Usage:
  helm-oracle.py render CHART VALUES_JSON OPTS_JSON
      Renders one chart; prints {"ok": {path: text}} or {"err": message} as JSON.
  helm-oracle.py cases < cases.json
      Batch of one-off charts: [{"templates": {name: text}, "values_yaml": str,
      "values": obj, "opts": obj, "chart_yaml": str}]; prints a JSON list of results.
  helm-oracle.py manifests < charts.json
      Charts [{"chart": path}] (or one-off charts as for `cases`) installed with
      `--dry-run=client` (memory storage, no cluster, chart defaults): prints a JSON list
      of {"ok": release manifest} or {"err": message} — the documents as Helm's
      SplitManifests and SortManifests leave them.
  helm-oracle.py batch < jobs.json
      Jobs [{"chart": path, "values_files": [paths], "set": [strings], "opts": obj}];
      values files are parsed by Helm and merged; prints [{"values": obj, "result": ...}].
  helm-oracle.py setstring < expressions.json
      Each expression parsed by Helm's strvals.ParseString (`--set-string`, what
      helm-operator does with a watches entry's `overrideValues`); prints a JSON list of
      {"ok": values} or {"err": message}.
  helm-oracle.py bench CHART VALUES_JSON OPTS_JSON N
      Prints the median load and render times in milliseconds.
Values are passed as JSON, so numbers are float64 as with `helm template -f`.
"""
import json
import os
import statistics
import sys
import tempfile
import time

import helm_python as helm
from helm_python import _native


def render(chart_path, values_json, opts_json):
    try:
        chart = helm.Chart.load(chart_path)
    except Exception as e:  # noqa: BLE001 - the message is the result
        return {"err": str(e)}
    try:
        out = _native.call_string("helm_render", chart._raw(), values_json, opts_json)
        return {"ok": json.loads(out)}
    except Exception as e:  # noqa: BLE001
        return {"err": str(e)}
    finally:
        chart.close()


def write_case(case, root):
    d = tempfile.mkdtemp(dir=root)
    chart = os.path.join(d, "chart")
    os.makedirs(os.path.join(chart, "templates"))
    with open(os.path.join(chart, "Chart.yaml"), "w") as f:
        f.write(case.get("chart_yaml", "apiVersion: v2\nname: chart\nversion: 0.1.0\n"))
    with open(os.path.join(chart, "values.yaml"), "w") as f:
        f.write(case.get("values_yaml", ""))
    for name, text in case.get("templates", {}).items():
        p = os.path.join(chart, "templates", name)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w", newline="") as f:
            f.write(text)
    for name, text in case.get("files", {}).items():
        p = os.path.join(chart, name)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(text)
    return chart


def run_case(case, root):
    chart = write_case(case, root)
    values = json.dumps(case.get("values", {}))
    opts = json.dumps(case.get("opts", {"kube_version": "v1.31.0"}))
    return render(chart, values, opts)


def install_manifest(case, root):
    chart = case["chart"] if "chart" in case else write_case(case, root)
    cfg = helm.Config(kube_apiserver="https://127.0.0.1:1", storage_driver="memory")
    try:
        rel = cfg.install(chart, case.get("name", "release-name"), case.get("values", {}), dry_run="client")
        return {"ok": rel["manifest"]}
    except Exception as e:  # noqa: BLE001 - the message is the result
        return {"err": str(e)}
    finally:
        cfg.close()


def merge(base, over):
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(base.get(k), dict):
            merge(base[k], v)
        else:
            base[k] = v
    return base


def run_job(job):
    vals = {}
    try:
        for f in job.get("values_files", []):
            with open(f) as fh:
                merge(vals, helm.values_from_yaml(fh.read()))
        for s in job.get("set", []):
            merge(vals, helm.parse_set_string(s))
    except Exception as e:  # noqa: BLE001
        return {"values": vals, "result": {"err": f"values: {e}"}}
    opts = job.get("opts", {"kube_version": "v1.31.0"})
    return {"values": vals, "result": render(job["chart"], json.dumps(vals), json.dumps(opts))}


def main():
    cmd = sys.argv[1]
    if cmd == "render":
        print(json.dumps(render(sys.argv[2], sys.argv[3], sys.argv[4])))
    elif cmd == "cases":
        cases = json.load(sys.stdin)
        with tempfile.TemporaryDirectory() as root:
            print(json.dumps([run_case(c, root) for c in cases]))
    elif cmd == "manifests":
        cases = json.load(sys.stdin)
        with tempfile.TemporaryDirectory() as root:
            print(json.dumps([install_manifest(c, root) for c in cases]))
    elif cmd == "batch":
        print(json.dumps([run_job(j) for j in json.load(sys.stdin)]))
    elif cmd == "setstring":
        out = []
        for expr in json.load(sys.stdin):
            try:
                out.append({"ok": helm.parse_set_string_values(expr)})
            except Exception as e:  # noqa: BLE001 - the message is the result
                out.append({"err": str(e)})
        print(json.dumps(out))
    elif cmd == "bench":
        chart_path, values_json, opts_json, n = sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
        loads, renders = [], []
        for _ in range(n):
            t0 = time.perf_counter()
            chart = helm.Chart.load(chart_path)
            t1 = time.perf_counter()
            _native.call_string("helm_render", chart._raw(), values_json, opts_json)
            t2 = time.perf_counter()
            chart.close()
            loads.append((t1 - t0) * 1e3)
            renders.append((t2 - t1) * 1e3)
        print(json.dumps({"load_ms": statistics.median(loads), "render_ms": statistics.median(renders)}))
    else:
        sys.exit(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
