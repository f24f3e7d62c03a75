#!/usr/bin/env python3
"""Runs `helm install` with the Helm 4 engine (helm-python-sdk, module helm_python) against a cluster.

Reads one JSON request on stdin:
  {"kubeconfig", "chart", "release", "namespace", "values" (optional),
   "wait": "watcher"|"hookOnly"|..., "timeout": seconds}
and writes one JSON document on stdout:
  {"helm_version", "ok", "error", "status", "started", "finished"}  (times: Unix seconds)
A failed install is data (the caller asserts on it); only a broken setup exits non-zero.
"""

import json
import sys
import time

try:
    import helm_python as helm
except ImportError as e:  # the caller turns this into a clear test failure
    print(f"helm-python-sdk is not installed (pip install helm-python-sdk): {e}", file=sys.stderr)
    sys.exit(3)


def main() -> int:
    request = json.load(sys.stdin)
    out = {"helm_version": helm.helm_sdk_version(), "ok": False, "error": None, "status": None}
    config = helm.Config(kubeconfig_path=request["kubeconfig"], namespace=request["namespace"])
    out["started"] = time.time()
    try:
        release = config.install(
            request["chart"],
            request["release"],
            request.get("values") or None,
            namespace=request["namespace"],
            wait=request.get("wait"),
            timeout=request.get("timeout"),
        )
        out["ok"] = True
        out["status"] = (release.get("info") or {}).get("status") if isinstance(release, dict) else None
    except helm.HelmError as e:
        out["error"] = str(e)
    out["finished"] = time.time()
    json.dump(out, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
