#!/usr/bin/env python3
"""A small operator for `bosun verify`'s own tests, with at most one planted bug.

A Widget (verify.bosun.dev/v1) owns one ConfigMap holding its spec; the Widget's status says
Ready once the ConfigMap is right, or Ready=False when writing it failed. A finalizer is
added and removed on delete. It talks plain HTTP to the API server named in KUBECONFIG (the
verifier's proxy, which holds the credentials), with the standard library only, so that the
tests need nothing built and nothing installed.

    widget.py [BUG [START [FIRST]]]

BUG is one of:
  none                   correct: every check of `bosun verify` passes
  not-idempotent         the child is created with generateName and recorded in status only
                         after some work: a crash between the two creates it again
  no-owner-ref           the child carries no owner reference
  status-every-reconcile status (with a timestamp) written on every reconcile: a hot loop
  finalizer-stuck        the finalizer is never removed
  no-drift-repair        children are neither watched nor repaired once created
  stale-read             whether the child exists is read from its watch cache, and
                         reconciles also run every second: a stale cache creates it again
  secret-in-log          the credentials Secret's value is logged
  time-travel            the Widget is read from the watch cache, and the cleanup on delete
                         deletes the child by name and drops the finalizer unconditionally:
                         restarted on an old view (the Widget being deleted, though a new
                         one of that name lives), it deletes the new one's child
  lost-spec-change       a Widget whose status says Ready for its generation is skipped, and
                         the status stamps the generation read at the end of a reconcile, not
                         the one it worked on: a spec change arriving mid-reconcile is marked
                         done and never applied
  forget-on-reconnect    when a watch breaks, the work queue is dropped and the re-list only
                         refills the cache: Widgets waiting in the queue when the API server
                         went away mid-convergence are never reconciled

START (seconds, default 0) passes before each start's first request: the slow start any
operator has on a loaded machine (a CI runner beside other builds), given on purpose, so that
a test can show a fault still lands where the bug fires however late the operator gets there.
FIRST (seconds, default 0) passes before the first reconcile of each Widget of a run: an
operator slow to get to the next object, which the verifier must wait for rather than call
converged once the first has been quiet for a while.
"""
import json
import os
import queue
import re
import sys
import threading
import time
import urllib.error
import urllib.request

BUG = sys.argv[1] if len(sys.argv) > 1 else "none"
BUGS = {"none", "not-idempotent", "no-owner-ref", "status-every-reconcile", "finalizer-stuck",
        "no-drift-repair", "stale-read", "secret-in-log", "time-travel", "lost-spec-change",
        "forget-on-reconnect"}
if BUG not in BUGS:
    sys.exit(f"widget.py: unknown bug {BUG!r}; one of {sorted(BUGS)}")
try:
    START = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
except ValueError:
    sys.exit(f"widget.py: START must be a number of seconds, not {sys.argv[2]!r}")
try:
    FIRST = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
except ValueError:
    sys.exit(f"widget.py: FIRST must be a number of seconds, not {sys.argv[3]!r}")

FINALIZER = "verify.bosun.dev/cleanup"
GROUP = "/apis/verify.bosun.dev/v1"
# The window between creating a child and recording it: where a crash lands.
WORK = 1.0


def server():
    text = open(os.environ["KUBECONFIG"]).read()
    m = re.search(r"server:\s*(\S+)", text)
    if not m:
        sys.exit("widget.py: no server in KUBECONFIG")
    return m.group(1).rstrip("/")


SERVER = server()
NS = os.environ.get("WATCH_NAMESPACE", "default").split(",")[0]


class HttpError(Exception):
    def __init__(self, code, body):
        super().__init__(f"{code}: {body[:200]}")
        self.code = code


def call(method, path, body=None, content_type="application/json"):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(SERVER + path, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", content_type)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        raise HttpError(e.code, e.read().decode(errors="replace")) from None


def get(path):
    try:
        return call("GET", path)
    except HttpError as e:
        if e.code == 404:
            return None
        raise


def merge(path, body):
    return call("PATCH", path, body, "application/merge-patch+json")


def log(msg):
    print(f"{time.strftime('%H:%M:%S')} widget[{BUG}] {msg}", flush=True)


widgets = {}
configmaps = {}
lock = threading.Lock()
work = queue.Queue()


def watch(path, cache, on_event):
    """List, then watch from the list's version, resuming from the last one seen (as client
    libraries' informers do); a version too old to resume from (410) lists again."""
    rv = None
    forgetting = False
    while True:
        try:
            if rv is None:
                listed = call("GET", path)
                items = listed.get("items") or []
                with lock:
                    cache.clear()
                    for obj in items:
                        cache[obj["metadata"]["name"]] = obj
                rv = listed["metadata"]["resourceVersion"]
                if not forgetting:
                    for obj in items:
                        on_event(obj)
            url = f"{SERVER}{path}?watch=true&allowWatchBookmarks=true&resourceVersion={rv}"
            with urllib.request.urlopen(url, timeout=300) as r:
                for line in r:
                    ev = json.loads(line)
                    obj = ev["object"]
                    if ev["type"] == "ERROR":
                        if obj.get("code") == 410:
                            rv = None
                        break
                    rv = obj["metadata"].get("resourceVersion", rv)
                    if ev["type"] == "BOOKMARK":
                        continue
                    name = obj["metadata"]["name"]
                    with lock:
                        if ev["type"] == "DELETED":
                            cache.pop(name, None)
                        else:
                            cache[name] = obj
                    on_event(obj)
        except Exception as e:  # noqa: BLE001 - a watch reconnects whatever broke it
            log(f"watch {path}: {e}")
        if BUG == "forget-on-reconnect" and rv is not None:
            # The planted bug: a broken watch "starts over" from a quiet re-list and drops
            # whatever was waiting in the queue.
            forgetting = True
            rv = None
            dropped = 0
            while True:
                try:
                    work.get_nowait()
                    dropped += 1
                except queue.Empty:
                    break
            log(f"watch {path} broke: re-listing, {dropped} queued reconciles dropped")
        time.sleep(0.5)


def owner_of(cm):
    for ref in cm["metadata"].get("ownerReferences") or []:
        if ref.get("kind") == "Widget":
            return ref["name"]
    return cm["metadata"].get("labels", {}).get("widget")


def set_status(w, ready, reason, message):
    cond = {"type": "Ready", "status": "True" if ready else "False", "reason": reason,
            "message": message}
    st = w.get("status") or {}
    old = [dict(c, lastTransitionTime=None) for c in st.get("conditions", [])]
    same = old == [dict(cond, lastTransitionTime=None)] and \
        st.get("observedGeneration") == w["metadata"]["generation"]
    if same and BUG != "status-every-reconcile":
        return
    cond["lastTransitionTime"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    status = {"observedGeneration": w["metadata"]["generation"], "conditions": [cond]}
    if BUG == "status-every-reconcile":
        status["lastReconcileTime"] = time.time()
    merge(f"{GROUP}/namespaces/{NS}/widgets/{w['metadata']['name']}/status", {"status": status})


def child_body(w, data, name=None, generate=None):
    meta = {"labels": {"widget": w["metadata"]["name"]}}
    if name:
        meta["name"] = name
    if generate:
        meta["generateName"] = generate
    if BUG != "no-owner-ref":
        meta["ownerReferences"] = [{
            "apiVersion": "verify.bosun.dev/v1", "kind": "Widget",
            "name": w["metadata"]["name"], "uid": w["metadata"]["uid"],
            "controller": True, "blockOwnerDeletion": True}]
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


def ensure_child(w, data):
    name = w["metadata"]["name"]
    cms = f"/api/v1/namespaces/{NS}/configmaps"
    if BUG == "not-idempotent":
        recorded = (w.get("status") or {}).get("child")
        child = get(f"{cms}/{recorded}") if recorded else None
        if child is None:
            made = call("POST", cms, child_body(w, data, generate=f"{name}-config-"))
            time.sleep(WORK)
            merge(f"{GROUP}/namespaces/{NS}/widgets/{name}/status",
                  {"status": {"child": made["metadata"]["name"]}})
            return
    elif BUG == "stale-read":
        with lock:
            mine = [c for c in configmaps.values() if owner_of(c) == name]
        if not mine:
            call("POST", cms, child_body(w, data, generate=f"{name}-config-"))
            time.sleep(WORK)
            return
        child = mine[0]
    else:
        child = get(f"{cms}/{name}-config")
        if child is None:
            call("POST", cms, child_body(w, data, name=f"{name}-config"))
            time.sleep(WORK)
            return
    if child.get("data") != data and BUG != "no-drift-repair":
        merge(f"{cms}/{child['metadata']['name']}", {"data": data})


reconciled = set()


def reconcile(name):
    if name not in reconciled:
        reconciled.add(name)
        time.sleep(FIRST)
    if BUG == "time-travel":
        with lock:
            w = widgets.get(name)
    else:
        w = get(f"{GROUP}/namespaces/{NS}/widgets/{name}")
    if w is None:
        return
    meta = w["metadata"]
    finalizers = meta.get("finalizers") or []
    if meta.get("deletionTimestamp"):
        if BUG == "time-travel":
            try:
                call("DELETE", f"/api/v1/namespaces/{NS}/configmaps/{name}-config")
            except HttpError as e:
                if e.code != 404:
                    raise
            merge(f"{GROUP}/namespaces/{NS}/widgets/{name}", {"metadata": {"finalizers": None}})
        elif FINALIZER in finalizers and BUG != "finalizer-stuck":
            rest = [f for f in finalizers if f != FINALIZER]
            merge(f"{GROUP}/namespaces/{NS}/widgets/{name}",
                  {"metadata": {"finalizers": rest or None, "resourceVersion": meta["resourceVersion"]}})
        return
    if BUG == "lost-spec-change":
        st = w.get("status") or {}
        ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                    for c in st.get("conditions") or [])
        if ready and st.get("observedGeneration") == meta["generation"]:
            return
    if FINALIZER not in finalizers:
        w = merge(f"{GROUP}/namespaces/{NS}/widgets/{name}",
                  {"metadata": {"finalizers": finalizers + [FINALIZER],
                                "resourceVersion": meta["resourceVersion"]}})
    spec = w.get("spec") or {}
    secret = spec.get("credentialsSecret")
    if secret:
        s = get(f"/api/v1/namespaces/{NS}/secrets/{secret}")
        if s is None:
            set_status(w, False, "SecretMissing", f"Secret {secret} not found")
            return
        if BUG == "secret-in-log":
            import base64
            pw = base64.b64decode(s.get("data", {}).get("password", "")).decode()
            log(f"connecting with password {pw}")
    data = {"size": str(spec.get("size", 1)), "color": spec.get("color", "red")}
    try:
        ensure_child(w, data)
    except HttpError as e:
        log(f"{name}: writing its ConfigMap failed: {e}")
        set_status(get(f"{GROUP}/namespaces/{NS}/widgets/{name}") or w, False, "ChildWriteFailed",
                   f"writing the ConfigMap failed: {e.code}")
        raise
    set_status(get(f"{GROUP}/namespaces/{NS}/widgets/{name}") or w, True, "Reconciled",
               "the ConfigMap holds the spec")


def worker():
    while True:
        name = work.get()
        try:
            reconcile(name)
        except Exception as e:  # noqa: BLE001 - retried, as a controller's queue does
            log(f"reconcile {name}: {e}")
            threading.Timer(1.0, work.put, args=(name,)).start()
        if BUG == "status-every-reconcile":
            time.sleep(0.1)


def resync():
    while True:
        time.sleep(1.0)
        with lock:
            names = list(widgets)
        for n in names:
            work.put(n)


def main():
    time.sleep(START)
    log(f"watching namespace {NS} through {SERVER}")
    threading.Thread(target=watch, daemon=True,
                     args=(f"{GROUP}/namespaces/{NS}/widgets", widgets,
                           lambda o: work.put(o["metadata"]["name"]))).start()
    if BUG != "no-drift-repair":
        def on_child(cm):
            owner = owner_of(cm)
            if owner:
                work.put(owner)
        threading.Thread(target=watch, daemon=True,
                         args=(f"/api/v1/namespaces/{NS}/configmaps", configmaps, on_child)).start()
    if BUG == "stale-read":
        threading.Thread(target=resync, daemon=True).start()
    worker()


if __name__ == "__main__":
    main()
