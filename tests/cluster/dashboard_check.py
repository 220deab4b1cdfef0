#!/usr/bin/env python3
"""Runs every query of dashboards/swarm-operator.json against a Prometheus and reports, per panel,
whether it shows data (at least one of its queries returns a series).

    dashboard_check.py [--allow-empty TITLE]... PROMETHEUS_URL DASHBOARD.json NAMESPACE SWARMJOB OPERATOR_NAMESPACE [RATE_INTERVAL]

Exit status 0 when every panel shows data (but those named with --allow-empty, which are reported),
1 otherwise (each empty panel and its queries named)."""
import json
import sys
import urllib.parse
import urllib.request


def query(url, expr):
    q = urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(f"{url}/api/v1/query?{q}", timeout=10) as r:
        body = json.load(r)
    if body.get("status") != "success":
        raise RuntimeError(f"{expr}: {body}")
    return body["data"]["result"]


def main():
    args = sys.argv[1:]
    allowed = set()
    while len(args) >= 2 and args[0] == "--allow-empty":
        allowed.add(args[1])
        args = args[2:]
    if len(args) < 5:
        print(__doc__, file=sys.stderr)
        return 2
    url, path, ns, job, opns = args[:5]
    rate = args[5] if len(args) > 5 else "1m"
    with open(path) as f:
        dash = json.load(f)
    subst = {"$namespace": ns, "$swarmjob": job, "$operator_namespace": opns, "$__rate_interval": rate}
    empty = []
    panels = [p for p in dash["panels"] if p.get("targets")]
    for p in panels:
        shown = 0
        exprs = []
        for t in p["targets"]:
            e = t["expr"]
            for k, v in subst.items():
                e = e.replace(k, v)
            exprs.append(e)
            shown += len(query(url, e))
        allowed_empty = not shown and p.get("title") in allowed
        print(f"{'ok   ' if shown else ('empty (allowed)' if allowed_empty else 'EMPTY')} {p.get('title')}: {shown} series")
        if not shown and not allowed_empty:
            empty.append((p.get("title"), exprs))
    print(f"{len(panels) - len(empty)}/{len(panels)} panels show data or are allowed to be empty")
    for title, exprs in empty:
        print(f"empty panel {title!r}: " + " | ".join(exprs))
    return 1 if empty else 0


if __name__ == "__main__":
    sys.exit(main())
