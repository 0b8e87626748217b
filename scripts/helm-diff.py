"""Renders a chart with bosun and with Helm's engine (libhelm) on the same input and
reports, per template file, whether the output is byte-identical, and the first
differing line if not. Exit status 1 when anything differs.

Usage: helm-diff.py BOSUN CHART [-f values.yaml]... [--set a=b]... [--set-string a=b]...
       [--name R] [--namespace N] [--kube-version V] [--api-versions G/V]...
Values are parsed by Helm (values_from_yaml / parse_set_string) and handed to both
engines as JSON, so numbers are float64 as with `helm template -f`.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import helm_python as helm
from helm_python import _native


def merge(base, over):
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(base.get(k), dict):
            merge(base[k], v)
        else:
            base[k] = v
    return base


def first_diff(a, b):
    la, lb = a.split("\n"), b.split("\n")
    for i, (x, y) in enumerate(zip(la, lb)):
        if x != y:
            return i + 1, x, y
    return min(len(la), len(lb)) + 1, "\n".join(la[len(lb):])[:200], "\n".join(lb[len(la):])[:200]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bosun")
    ap.add_argument("chart")
    ap.add_argument("-f", "--values", action="append", default=[])
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--set-string", action="append", default=[])
    ap.add_argument("--name", default="release-name")
    ap.add_argument("--namespace", default="default")
    ap.add_argument("--kube-version", default="v1.31.0")
    ap.add_argument("--api-versions", action="append", default=[])
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args()

    vals = {}
    for f in a.values:
        with open(f) as fh:
            merge(vals, helm.values_from_yaml(fh.read()))
    for s in a.set:
        merge(vals, helm.parse_set_string(s))
    for s in a.set_string:
        merge(vals, helm.parse_set_string_values(s))
    values_json = json.dumps(vals)
    opts = {"name": a.name, "namespace": a.namespace, "kube_version": a.kube_version,
            "api_versions": a.api_versions, "is_install": True}

    try:
        chart = helm.Chart.load(a.chart)
        helm_out = {"ok": json.loads(_native.call_string("helm_render", chart._raw(), values_json, json.dumps(opts)))}
    except Exception as e:  # noqa: BLE001 - the error text is the result
        helm_out = {"err": str(e)}

    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as tf:
        tf.write(values_json)
    cmd = [a.bosun, "render", a.chart, "--files-json", "--values-json", tf.name, "--name", a.name,
           "--namespace", a.namespace, "--kube-version", a.kube_version]
    for v in a.api_versions:
        cmd += ["--api-versions", v]
    r = subprocess.run(cmd, capture_output=True, text=True)
    os.unlink(tf.name)
    if r.returncode != 0:
        print(f"bosun failed: {r.stderr.strip()}")
        return 1
    bosun_out = json.loads(r.stdout)

    if "err" in helm_out or "err" in bosun_out:
        he, be = helm_out.get("err"), bosun_out.get("err")
        if he and be:
            print(f"both failed\n  helm:  {he.splitlines()[0] if he else ''}\n  bosun: {be.splitlines()[0] if be else ''}")
            return 0
        print(f"only one failed\n  helm:  {he}\n  bosun: {be}")
        return 1

    hf, bf = helm_out["ok"], bosun_out["ok"]
    bad = 0
    for path in sorted(set(hf) | set(bf)):
        if path not in bf:
            print(f"MISSING in bosun: {path}")
            bad += 1
        elif path not in hf:
            print(f"EXTRA in bosun: {path}")
            bad += 1
        elif hf[path] != bf[path]:
            line, x, y = first_diff(hf[path], bf[path])
            print(f"DIFF {path} line {line}\n  helm:  {x!r}\n  bosun: {y!r}")
            bad += 1
        elif not a.quiet:
            print(f"same {path}")
    print(f"{len(set(hf) | set(bf)) - bad} passed, {bad} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
