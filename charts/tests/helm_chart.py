#!/usr/bin/env python3
"""Lints and renders a chart with the Helm 4 engine (helm-python-sdk, module helm_python).

Reads a JSON request on stdin:
  {"chart": "<dir>", "cases": [{"name", "values", "release", "namespace"}]}
and writes one JSON document on stdout:
  {"helm_version", "crds": [file names], "results": [{"name", "lint", "manifests", "error"}]}
Rendering errors are data (the caller asserts on them); only a broken setup exits non-zero.
"""

import json
import sys

try:
    import helm_python as helm
except ImportError as e:  # the caller turns this into a clear test failure
    print(f"helm-python-sdk is not installed (pip install helm-python-sdk): {e}", file=sys.stderr)
    sys.exit(3)


def main() -> int:
    request = json.load(sys.stdin)
    chart_dir = request["chart"]
    out = {"helm_version": helm.helm_sdk_version(), "results": []}
    with helm.Chart.load(chart_dir) as chart:
        out["crds"] = sorted(c["filename"] for c in chart.crds)
        for case in request["cases"]:
            values = case.get("values") or None
            result = {"name": case["name"], "lint": None, "manifests": None, "error": None}
            # lint() reports findings as data; strict turns warnings into errors like `helm lint --strict`.
            result["lint"] = helm.lint(chart_dir, values, strict=True, namespace=case["namespace"])
            try:
                result["manifests"] = chart.render(
                    values, name=case["release"], namespace=case["namespace"], is_install=True
                )
            except helm.HelmError as e:
                result["error"] = str(e)
            out["results"].append(result)
    json.dump(out, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
