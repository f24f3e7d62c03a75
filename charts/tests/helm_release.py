#!/usr/bin/env python3
"""Runs one Helm 4 release action (helm-python-sdk, module helm_python) against a cluster.

Reads one JSON request on stdin:
  {"kubeconfig", "namespace", "action": "install"|"upgrade"|"rollback"|"uninstall"|"history",
   "release", "chart" (install/upgrade), "values" (optional), "wait": "watcher"|...|null,
   "timeout": seconds, "version": revision (rollback, optional), "create_namespace": bool}
and writes one JSON document on stdout:
  {"helm_version", "ok", "error", "status", "revision", "history", "started", "finished"}
A failed action is data (the caller asserts on it); only a broken setup exits non-zero.
"""

import json
import sys
import time

try:
    import helm_python as helm
except ImportError as e:  # the caller turns this into a clear test failure
    print(f"helm-python-sdk is not installed (pip install helm-python-sdk): {e}", file=sys.stderr)
    sys.exit(3)


def info(release):
    if not isinstance(release, dict):
        return None, None
    return (release.get("info") or {}).get("status"), release.get("version")


def run(config, r):
    action, name, ns = r["action"], r["release"], r["namespace"]
    wait, timeout = r.get("wait"), r.get("timeout")
    if action == "install":
        return config.install(r["chart"], name, r.get("values") or None, namespace=ns, wait=wait,
                              timeout=timeout, create_namespace=bool(r.get("create_namespace")))
    if action == "upgrade":
        # Like `helm upgrade` without --reuse-values: the request's values are the release's.
        return config.upgrade(r["chart"], name, r.get("values") or None, namespace=ns, wait=wait,
                              timeout=timeout, reset_values=True)
    if action == "rollback":
        config.rollback(name, version=r.get("version"), wait=wait, timeout=timeout)
        return config.status(name)
    if action == "uninstall":
        return config.uninstall(name, wait=wait, timeout=timeout)
    if action == "history":
        return None
    raise ValueError(f"unknown action {action}")


def main() -> int:
    r = json.load(sys.stdin)
    out = {"helm_version": helm.helm_sdk_version(), "ok": False, "error": None, "status": None,
           "revision": None, "history": None}
    config = helm.Config(kubeconfig_path=r["kubeconfig"], namespace=r["namespace"])
    out["started"] = time.time()
    try:
        release = run(config, r)
        out["status"], out["revision"] = info(release)
        if r["action"] == "history":
            out["history"] = [{"revision": h.get("version"), "status": (h.get("info") or {}).get("status")}
                              for h in config.history(r["release"]) if isinstance(h, dict)]
        out["ok"] = True
    except helm.HelmError as e:
        out["error"] = str(e)
    out["finished"] = time.time()
    json.dump(out, sys.stdout, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
