"""Packs a chart directory into a .tgz deterministically (sorted entries, zero times
and owners), the way the test corpus keeps its archived subchart.
Usage: make-test-tgz.py SRC_DIR OUT.tgz
"""
import gzip
import io
import os
import sys
import tarfile

src, out = sys.argv[1], sys.argv[2]
name = os.path.basename(os.path.normpath(src))
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
    for root, dirs, files in os.walk(src):
        dirs.sort()
        for f in sorted(files):
            path = os.path.join(root, f)
            rel = os.path.relpath(path, src)
            with open(path, "rb") as fh:
                data = fh.read()
            info = tarfile.TarInfo(f"{name}/{rel}")
            info.size = len(data)
            info.mode = 0o644
            info.mtime = 0
            tar.addfile(info, io.BytesIO(data))
with open(out, "wb") as fh:
    with gzip.GzipFile(fileobj=fh, mode="wb", mtime=0, filename="") as gz:
        gz.write(buf.getvalue())
