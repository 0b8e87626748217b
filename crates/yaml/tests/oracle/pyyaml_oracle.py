"""PyYAML (with libyaml, as Ansible runs it) as the oracle for bosun-yaml's PyYAML side.

Reads one JSON request on stdin, answers on stdout:

  {"load": [text, ...],                         -> yaml.load_all(text, Loader=CSafeLoader)
   "dump": [{"value": typed, "opts": {...}}]}   -> yaml.dump(value, Dumper=CSafeDumper, **opts)

Values travel as typed JSON so that Python types survive:
  {"t": "null"} {"t": "bool", "v": b} {"t": "int", "v": "digits"} {"t": "float", "v": repr}
  {"t": "str", "v": s} {"t": "bytes", "v": base64} {"t": "date", "v": "YYYY-MM-DD"}
  {"t": "datetime", "v": [y, m, d, H, M, S, us, offset_minutes or null]}
  {"t": "list", "v": [...]} {"t": "dict", "v": [[k, v], ...]}

Answer: {"versions": {...}, "load": [{"docs": [typed...]} | {"error": str, "type": name}],
         "dump": [text | {"error": str}]}
"""
import base64
import datetime
import json
import math
import sys

import yaml


def encode(v):
    if v is None:
        return {"t": "null"}
    if isinstance(v, bool):
        return {"t": "bool", "v": v}
    if isinstance(v, int):
        return {"t": "int", "v": str(v)}
    if isinstance(v, float):
        if math.isnan(v):
            return {"t": "float", "v": "nan"}
        return {"t": "float", "v": repr(v)}
    if isinstance(v, str):
        return {"t": "str", "v": v}
    if isinstance(v, bytes):
        return {"t": "bytes", "v": base64.b64encode(v).decode()}
    if isinstance(v, datetime.datetime):
        off = v.utcoffset()
        off = None if off is None else int(off.total_seconds() // 60)
        return {"t": "datetime", "v": [v.year, v.month, v.day, v.hour, v.minute, v.second, v.microsecond, off]}
    if isinstance(v, datetime.date):
        return {"t": "date", "v": v.isoformat()}
    if isinstance(v, list):
        return {"t": "list", "v": [encode(i) for i in v]}
    if isinstance(v, dict):
        return {"t": "dict", "v": [[encode(k), encode(x)] for k, x in v.items()]}
    if isinstance(v, set):
        return {"t": "dict", "v": [[encode(k), encode(None)] for k in v]}
    if isinstance(v, tuple):
        return {"t": "list", "v": [encode(i) for i in v]}
    raise TypeError("cannot encode %r" % type(v))


def decode(t):
    kind = t["t"]
    if kind == "null":
        return None
    if kind in ("bool", "str"):
        return t["v"]
    if kind == "int":
        return int(t["v"])
    if kind == "float":
        return float(t["v"])
    if kind == "bytes":
        return base64.b64decode(t["v"])
    if kind == "date":
        return datetime.date.fromisoformat(t["v"])
    if kind == "datetime":
        y, mo, d, h, mi, s, us, off = t["v"]
        tz = None if off is None else datetime.timezone(datetime.timedelta(minutes=off))
        return datetime.datetime(y, mo, d, h, mi, s, us, tzinfo=tz)
    if kind == "list":
        return [decode(i) for i in t["v"]]
    if kind == "dict":
        return {decode(k): decode(v) for k, v in t["v"]}
    raise TypeError(kind)


def node_marks(node, out, depth=0):
    """Preorder 1-based (line, column) of composed nodes; None for recursive graphs."""
    if depth > 500:
        raise RecursionError("recursive graph")
    out.append([node.start_mark.line + 1, node.start_mark.column + 1])
    if isinstance(node, yaml.SequenceNode):
        for n in node.value:
            node_marks(n, out, depth + 1)
    elif isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            node_marks(k, out, depth + 1)
            node_marks(v, out, depth + 1)
    return out


def load(text):
    try:
        docs = [encode(d) for d in yaml.load_all(text, Loader=yaml.CSafeLoader)]
    except Exception as e:  # the error is the answer
        return {"error": str(e), "type": type(e).__name__}
    try:
        marks = [node_marks(n, []) for n in yaml.compose_all(text, Loader=yaml.CSafeLoader)]
    except RecursionError:
        marks = None
    return {"docs": docs, "marks": marks}


def dump(case):
    try:
        return yaml.dump(decode(case["value"]), Dumper=yaml.CSafeDumper, **case["opts"])
    except Exception as e:
        return {"error": "%s: %s" % (type(e).__name__, e)}


def main():
    request = json.load(sys.stdin)
    json.dump(
        {
            "versions": {"pyyaml": yaml.__version__, "libyaml": yaml.__with_libyaml__},
            "load": [load(t) for t in request.get("load", [])],
            "dump": [dump(c) for c in request.get("dump", [])],
        },
        sys.stdout,
    )


if __name__ == "__main__":
    main()
