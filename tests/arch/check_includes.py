#!/usr/bin/env python3
"""The dependency directions of docs/architecture.md ("Dependency directions"), checked.

Reads every project #include "..." line under the source folders and fails, naming the file, the
line and the rule, on an include that breaks a stated direction. The rules are the table below:
a folder may include its own files, the folders its rule allows, and nothing else of the project.
System and library headers (<...>) are not checked, except that worker/model may use only
libtorch and the standard library among the project's dependencies (no sockets, no registry).

    tests/arch/check_includes.py [SOURCE_ROOT]      exit 0: every include follows the rules
"""
import os
import re
import sys

# Folder -> the project folders (or single files) it may include, besides its own files. A folder
# not listed here may include anything: tests, benchmarks, programs (cmd/) sit on top.
RULES = {
    "common": [],
    "planner": ["common/thread_annotations.h", "common/json_quote.h"],
    "worker/model": ["common/thread_annotations.h"],
    "worker/net": ["common/crypto.h", "common/thread_annotations.h", "common/json_quote.h"],
    "worker/data": ["common"],
    "worker/storage": ["common"],
    "registry": ["common", "planner"],
    "worker/runtime": ["common", "planner", "worker/model", "worker/net"],
    "worker/checkpoint": ["common", "worker/model", "worker/storage", "worker/runtime"],
    "worker/stage": ["common", "planner", "registry", "worker/model", "worker/net", "worker/runtime",
                     "worker/checkpoint"],
    "worker/trainer": ["common", "planner", "registry", "worker/data", "worker/net", "worker/runtime"],
    "worker/local": ["common", "planner", "registry", "worker/data", "worker/model", "worker/runtime",
                     "worker/checkpoint", "worker/trainer"],
    # The operator never reaches the data plane: its image carries no libtorch.
    "operator/api": ["common"],
    "operator/kube": ["common"],
    # Kueue's workloads, admission and lifecycle: pure decisions on the SwarmJob's types.
    "operator/kueue": ["common", "operator/api"],
    "operator/controller": ["common", "planner", "registry", "operator/api", "operator/kube", "operator/kueue"],
}
# Libraries a folder must not include even as <...> headers: what its rule's reason forbids.
FORBIDDEN_SYSTEM = {
    "planner": ["torch/", "cpprest/", "asio", "curl/"],
    "worker/model": ["cpprest/", "asio", "curl/", "prometheus/", "sys/socket.h"],
    "operator": ["torch/"],
    "common": ["torch/"],
}
SOURCE_DIRS = ["common", "planner", "registry", "worker", "operator"]
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def folder_of(path):
    """The most specific rule folder a file belongs to ('' when none)."""
    best = ""
    for folder in list(RULES) + list(FORBIDDEN_SYSTEM):
        if (path == folder or path.startswith(folder + "/")) and len(folder) > len(best):
            best = folder
    return best


def allowed(folder, target):
    if target.startswith(folder + "/"):
        return True
    for a in RULES.get(folder, []):
        if target == a or target.startswith(a + "/"):
            return True
    return False


def check(root):
    problems = []
    checked = 0
    for top in SOURCE_DIRS:
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if not name.endswith((".h", ".cc", ".hpp", ".cpp")):
                    continue
                path = os.path.relpath(os.path.join(dirpath, name), root)
                checked += 1
                with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
                    for lineno, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        kind, target = m.groups()
                        if kind == '"':
                            project = target.split("/")[0] in {"common", "planner", "registry", "worker",
                                                               "operator", "cmd", "tests", "bench"}
                            folder = folder_of(path)
                            if project and folder in RULES and not allowed(folder, target):
                                problems.append(f"{path}:{lineno}: includes {target}: {folder}/ may include "
                                                f"only itself and {RULES[folder] or 'nothing else'}")
                        for top_folder, banned in FORBIDDEN_SYSTEM.items():
                            if path.startswith(top_folder + "/") and any(target.startswith(b) for b in banned):
                                problems.append(f"{path}:{lineno}: includes <{target}>: {top_folder}/ must not "
                                                f"use it ({', '.join(banned)})")
    return checked, problems


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    checked, problems = check(os.path.abspath(root))
    for p in problems:
        print(p)
    if checked == 0:
        print("check_includes: no source files under", root)
        return 2
    print(f"check_includes: {checked} files, {len(problems)} includes against the stated directions")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
