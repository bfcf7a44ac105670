#!/usr/bin/env python3
"""Which compile units of one cargo command another would build again.

    export RUSTC_BOOTSTRAP=1   # --unit-graph is unstable: for looking only
    cargo build -p xtask --unit-graph -Z unstable-options > /tmp/xtask.json
    cargo test --workspace --no-run --unit-graph -Z unstable-options > /tmp/suite.json
    python3 xtask/scripts/compile_once.py /tmp/xtask.json /tmp/suite.json

A unit is the same in both when its package, target, mode, features,
profile settings and (recursively) dependencies are: cargo compiles it
once. Printed: the first command's units the second builds anew, and for
each the cause, the deepest unit whose own features differ (name those
features in xtask/Cargo.toml). docs/development.md "Compile once".
"""
import json
import sys


def load(path):
    units = json.load(open(path))["units"]
    memo = {}

    def key(i):
        if i not in memo:
            u = units[i]
            profile = {k: v for k, v in u["profile"].items() if k != "name"}
            deps = tuple(sorted(key(d["index"]) for d in u["dependencies"]))
            memo[i] = hash((u["pkg_id"], u["target"]["name"], u["mode"],
                            tuple(u["features"]), json.dumps(profile, sort_keys=True), deps))
        return memo[i]

    for i in range(len(units)):
        key(i)
    return units, memo


def own(u):
    return (u["pkg_id"].split("#")[-1], u["target"]["name"], u["mode"], tuple(u["features"]))


def main(first, second):
    a, ka = load(first)
    b, kb = load(second)
    in_b = set(kb.values())
    by_own = {}
    for i, u in enumerate(b):
        by_own.setdefault(own(u), []).append(i)
    again = [i for i, u in enumerate(a) if ka[i] not in in_b and u["mode"] != "run-custom-build"]
    print(f"{len(again)} of {len(a)} units of {first} are built again by {second}")
    again_set = set(again)
    # A unit built again whose dependencies are all shared differs itself:
    # in its features, or in which build of a dependency it links.
    for i in again:
        deps = [d["index"] for d in a[i]["dependencies"]]
        if any(d in again_set for d in deps):
            continue
        name, target, mode, features = own(a[i])
        twins = by_own.get(own(a[i]), [])
        if not twins:
            others = [",".join(own(u)[3]) for u in b if own(u)[:3] == (name, target, mode)]
            print(f"  {name} {target}: features {','.join(features) or '-'}; the other has {others}")
            continue
        explain(a, ka, b, kb, i, twins[0], name, set())
    return 1 if again else 0


def explain(a, ka, b, kb, i, j, top, seen):
    """Why unit i of the first graph is not unit j of the second, which has
    the same package, target and features: a dependency, perhaps deep
    down (the same build of it may serve the other as a build-time
    dependency only)."""
    if (i, j) in seen:
        return
    seen.add((i, j))
    theirs = {}
    for d in b[j]["dependencies"]:
        theirs.setdefault(own(b[d["index"]]), []).append(d["index"])
    for d in a[i]["dependencies"]:
        mine = d["index"]
        same = theirs.get(own(a[mine]), [])
        if any(kb[t] == ka[mine] for t in same):
            continue
        if same:
            explain(a, ka, b, kb, mine, same[0], top, seen)
            continue
        dn, dt, _, df = own(a[mine])
        wanted = sorted({",".join(own(b[t["index"]])[3]) for t in b[j]["dependencies"]
                         if own(b[t["index"]])[:2] == (dn, dt)})
        print(f"  {top}: {own(a[i])[0]} links {dn} with features {','.join(df) or '-'}; "
              f"the other with {wanted}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
