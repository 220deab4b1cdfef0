#!/usr/bin/env python3
"""Where a replacement worker's start-up time goes (bench/cluster.sh, tests/cluster/cluster_e2e_test.sh).

  pod_phases.py T SELECTOR    for every pod matching SELECTOR created at or after epoch T (less 1 s:
                              the API's timestamps have whole seconds), one line of seconds from T:
                              created (the operator wrote it), scheduled, container started (sandbox
                              + runc), process (the worker's first log line), serving (its "serving
                              stage" line: registry join and parameter download done), ready (the
                              readiness probe passed). Uses kubectl and $KUBECONFIG.
"""
import datetime
import json
import subprocess
import sys


def epoch(stamp):
    if not stamp:
        return None
    return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def phases(pod, t):
    name = pod["metadata"]["name"]
    conditions = {c["type"]: epoch(c.get("lastTransitionTime")) for c in pod["status"].get("conditions", [])}
    container = (pod["status"].get("containerStatuses") or [{}])[0]
    started = epoch(container.get("state", {}).get("running", {}).get("startedAt"))
    logs = subprocess.run(["kubectl", "logs", "--timestamps", name], capture_output=True, text=True).stdout.splitlines()
    first = epoch(logs[0].split()[0]) if logs else None
    serving = next((epoch(line.split()[0]) for line in logs if " serving stage " in line), None)
    ready = conditions.get("Ready") if pod["status"].get("phase") == "Running" else None
    show = lambda v: "-" if v is None else "%.2f" % (v - t)
    return "%s: created %s scheduled %s started %s process %s serving %s ready %s" % (
        name, show(epoch(pod["metadata"]["creationTimestamp"])), show(conditions.get("PodScheduled")),
        show(started), show(first), show(serving), show(ready))


def main():
    t, selector = float(sys.argv[1]), sys.argv[2]
    pods = json.loads(subprocess.run(["kubectl", "get", "pods", "-l", selector, "-o", "json"],
                                     capture_output=True, text=True, check=True).stdout)["items"]
    for pod in pods:
        created = epoch(pod["metadata"]["creationTimestamp"])
        if created is not None and created >= t - 1:
            print("phases " + phases(pod, t))


if __name__ == "__main__":
    main()
