#!/usr/bin/env python3
"""Runs built cargo test binaries, several at once, as `cargo test` would run each one.

    run-tests.py [--jobs N] [--only PKG:TARGET ...] [--env K=V ...] [-- TEST-ARGS...]

The binaries come from `cargo test --workspace --no-run --message-format=json` (built first,
`--locked`); each runs in its package's directory with the variables cargo sets at run time
(CARGO_MANIFEST_DIR, CARGO_PKG_NAME, ...), its output kept whole and printed, under cargo's own
`Running` header, when it ends, so the `test result:` lines read as cargo's. Test binaries of
one package share nothing with another's (each starts its own control plane), so up to
`--jobs` run together. The exit status is non-zero when any binary fails; every binary runs.
`--only crate:target` (e.g. `bosun-bookstore:e2e`, `bosun-bookstore:lib`) picks binaries.
"""
import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile
import threading
import time


def built_binaries(cargo_args):
    out = subprocess.run(
        ["cargo", "test", "--workspace", "--locked", "--no-run", "--message-format=json"]
        + cargo_args,
        stdout=subprocess.PIPE,
        check=True,
    ).stdout
    found = []
    for line in out.splitlines():
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if msg.get("reason") != "compiler-artifact" or not msg.get("executable"):
            continue
        if not msg.get("profile", {}).get("test"):
            continue
        target = msg["target"]
        # package_id: "path+file:///work/main/crates/bookstore#bosun-bookstore@0.1.0", or
        # "path+file:///work/main/crates/bosun#0.1.0" when the name is the directory's.
        url, _, fragment = msg["package_id"].partition("#")
        pkg = fragment.split("@")[0] if "@" in fragment else url.rstrip("/").rsplit("/", 1)[-1]
        name = "lib" if "lib" in target["kind"] else target["name"]
        found.append(
            {
                "package": pkg,
                "target": name,
                "exe": msg["executable"],
                "src": target["src_path"],
                "manifest": msg["manifest_path"],
            }
        )
    return found


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", action="append", default=[])
    ap.add_argument("--env", action="append", default=[])
    ap.add_argument("--label", default="")
    ap.add_argument("rest", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    test_args = a.rest[1:] if a.rest[:1] == ["--"] else a.rest
    bins = built_binaries([])
    if a.only:
        wanted = set(a.only)
        bins = [b for b in bins if f"{b['package']}:{b['target']}" in wanted]
        missing = wanted - {f"{b['package']}:{b['target']}" for b in bins}
        if missing:
            sys.exit(f"run-tests: no test binary for {sorted(missing)}")
    extra_env = dict(kv.split("=", 1) for kv in a.env)
    lock = threading.Lock()
    failed = []

    def run(b):
        pkg_dir = os.path.dirname(b["manifest"])
        env = dict(os.environ)
        env.update(
            {
                "CARGO_MANIFEST_DIR": pkg_dir,
                "CARGO_PKG_NAME": b["package"],
                "CARGO_CRATE_NAME": b["target"].replace("-", "_"),
                "CARGO": env.get("CARGO", "cargo"),
            }
        )
        env.update(extra_env)
        start = time.monotonic()
        with tempfile.TemporaryFile() as log:
            code = subprocess.call(
                [b["exe"]] + test_args, cwd=pkg_dir, env=env, stdout=log, stderr=subprocess.STDOUT
            )
            log.seek(0)
            text = log.read().decode("utf-8", "replace")
        took = time.monotonic() - start
        rel = os.path.relpath(b["src"], pkg_dir)
        with lock:
            print(f"     Running {rel} ({os.path.relpath(b['exe'])}) {a.label}[{took:.0f} s]", flush=True)
            sys.stdout.write(text)
            sys.stdout.flush()
            if code != 0:
                failed.append(f"{b['package']}:{b['target']}")

    # Longest first (the e2e binaries), so the tail is short ones.
    order = sorted(bins, key=lambda b: ("tests" not in b["src"], b["package"], b["target"]))
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, a.jobs)) as pool:
        list(pool.map(run, order))
    if failed:
        print(f"run-tests {a.label}: failed binaries: {' '.join(sorted(failed))}", flush=True)
        sys.exit(101)


if __name__ == "__main__":
    main()
