"""Turns the dumps of upstream's tests (generate.sh) into custom resource writes, asks the
validation oracle about each, and writes the cases with its answers:

  validation.jsonl  apiextensions-apiserver pkg/apiserver/schema/cel/validation_test.go
  library.jsonl     apiserver pkg/cel/library/{cidr,format,ip,quantity,semver}_test.go
  dropped.jsonl     the dumped cases left out, each with its reason

One case a line: source (upstream file:subtest), placement ("spec": the upstream schema is the
CRD's `spec` property, "root": it is the CRD's openAPIV3Schema), schema, old and new (the whole
objects written: old the stored object of an update, null for a create), stored (only where the
server stores something else than new outside metadata: what the oracle's write stored, which is
what validation judged), expect {code, errors (the error texts, a set), warnings} and, for
reference, upstream: what upstream's own test asserted or got (schema/cel tests: the errors of
upstream's Validate at path `root`; library tests: the expected value, error or compile errors).
"""

import argparse
import json
import re
import subprocess
import sys
from collections import Counter

API = "example.com/v1"
KIND = "Widget"
RUNTIME_BUDGET = 10_000_000
MAXINT = 9223372036854775807


def crd(root_schema):
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "names": {"plural": "widgets", "singular": "widget", "kind": KIND, "listKind": "WidgetList"},
            "scope": "Namespaced",
            "versions": [{"name": "v1", "served": True, "storage": True,
                          "schema": {"openAPIV3Schema": root_schema}}],
        },
    }


def root_schema(placement, schema):
    if placement == "root":
        return schema
    return {"type": "object", "properties": {"spec": schema}}


def obj(placement, value):
    """The object written, `value` (upstream's object) at the root or as `spec`."""
    if placement == "root":
        o = dict(value)
        o["apiVersion"] = API
        o["kind"] = KIND
        meta = dict(o.get("metadata") or {})
        meta.setdefault("name", "w1")
        o["metadata"] = meta
        return o
    o = {"apiVersion": API, "kind": KIND, "metadata": {"name": "w1"}}
    if value is not None:
        o["spec"] = value
    return o


def without_meta(o):
    return {k: v for k, v in (o or {}).items() if k != "metadata"}


def validation_cases(path, dropped):
    out = []
    for line in open(path):
        r = json.loads(line)
        source = "validation_test.go:" + r["test"] + ("" if r["call"] == 1 else f"#call{r['call']}")
        if "unmarshalable" in r:
            dropped.append({"source": source, "reason": "inputs not JSON: " + r["unmarshalable"]})
            continue
        if r["budget"] not in (RUNTIME_BUDGET, MAXINT):
            dropped.append({"source": source, "reason": f"runtime cost budget {r['budget']}: a CRD write always has {RUNTIME_BUDGET}"})
            continue
        new, old = r["obj"], r["oldObj"]
        placement = "spec"
        if r["isRoot"] and isinstance(new, dict) and {"apiVersion", "kind", "metadata"} & set(new):
            placement = "root"
        out.append({
            "source": source,
            "placement": placement,
            "schema": r["schema"],
            "old": None if old is None else obj(placement, old),
            "new": obj(placement, new),
            "upstream": {"is_root": r["isRoot"], "ratcheting": r["ratcheting"], "budget": r["budget"],
                         "errors": sorted(r["upstream_errors"])},
        })
    return out


def library_cases(path, dropped):
    out = []
    dumps = [json.loads(line) for line in open(path)]
    # Subtests of one name (Go numbers them #01, #02, ... in an order that follows a map's)
    # are told apart by their expression.
    base = lambda r: re.sub(r"#\d+$", "", r["test"])
    shared = Counter(base(r) for r in dumps)
    for r in dumps:
        file = r["test"].split("/")[0].removeprefix("Test").lower() + "_test.go"
        source = file + ":" + base(r)
        if shared[base(r)] > 1:
            source += f" [{r['expr']}]"
        expr = r["expr"]
        upstream = {"expr": expr}
        if r["expect_compile_errs"]:
            dropped.append({"source": source, "reason": "upstream expects compile errors (the CRD is refused): "
                            + "; ".join(r["expect_compile_errs"])})
            continue
        if r["expect_runtime_err"]:
            rule = f"({expr}) == ({expr})"
            upstream["runtime_error"] = r["expect_runtime_err"]
        elif r["expect_literal"]:
            rule = f"({expr}) == {r['expect_literal']}"
            upstream["value"] = r["expect_literal"]
        else:
            dropped.append({"source": source, "reason": "expected value has no CEL literal: " + r["expect_go"]})
            continue
        if "library_version" in r:
            upstream["library_version"] = r["library_version"]
        schema = {"type": "object", "x-kubernetes-validations": [{"rule": rule}]}
        out.append({"source": source, "placement": "spec", "schema": schema,
                    "old": None, "new": obj("spec", {}), "upstream": upstream})
    return out


def ask(oracle, cases):
    lines = []
    for i, c in enumerate(cases):
        lines.append(json.dumps({"id": i, "crd": crd(root_schema(c["placement"], c["schema"])),
                                 "old": c["old"], "new": c["new"]}))
    p = subprocess.run([oracle], input="\n".join(lines) + "\n", capture_output=True, text=True, check=True)
    answers = [json.loads(l) for l in p.stdout.splitlines()]
    assert len(answers) == len(cases), (len(answers), len(cases), p.stderr[-2000:])
    return answers


def settle(cases, answers, dropped):
    kept = []
    for c, a in zip(cases, answers):
        if "input_error" in a:
            dropped.append({"source": c["source"], "reason": "oracle input error: " + a["input_error"]})
            continue
        if a.get("crd_errors"):
            # CEL's names for a rule's object types carry a random number.
            why = re.sub(r"selfType\d+", "selfType", "; ".join(sorted(a["crd_errors"])))
            dropped.append({"source": c["source"], "reason": "the CRD is refused: " + why})
            continue
        if a["code"] not in (200, 201, 422):
            dropped.append({"source": c["source"], "reason": f"the write is a {a['code']}: {a.get('message', '')}"})
            continue
        stored = a["object"]
        if without_meta(stored) != without_meta(c["new"]):
            c["stored"] = stored
        c["expect"] = {"code": a["code"], "errors": sorted({e["error"] for e in a["errors"] or []}),
                       "warnings": sorted(set(a.get("warnings") or []))}
        upstream = c.pop("upstream")
        c["upstream"] = upstream
        kept.append(c)
    return kept


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--oracle", required=True)
    ap.add_argument("--module-version", required=True)
    ap.add_argument("--validation", required=True)
    ap.add_argument("--library", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    dropped = []
    files = {
        "validation.jsonl": validation_cases(a.validation, dropped),
        "library.jsonl": library_cases(a.library, dropped),
    }
    for name, cases in files.items():
        # The upstream tests run in parallel: their dumps come in any order.
        cases.sort(key=lambda c: c["source"])
        kept = settle(cases, ask(a.oracle, cases), dropped)
        with open(f"{a.out}/{name}", "w") as f:
            for c in kept:
                f.write(json.dumps(c, sort_keys=False, ensure_ascii=False) + "\n")
        by = Counter(c["source"].split(":")[0] + ":" + c["source"].split(":")[1].split("/")[0] for c in kept)
        print(f"{name}: {len(kept)} cases", dict(sorted(by.items())), file=sys.stderr)
    dropped.sort(key=lambda d: d["source"])
    with open(f"{a.out}/dropped.jsonl", "w") as f:
        for d in dropped:
            f.write(json.dumps(d, ensure_ascii=False) + "\n")
    by = Counter(d["source"].split(":")[0] + ":" + d["source"].split(":")[1].split("/")[0] for d in dropped)
    print(f"dropped.jsonl: {len(dropped)} cases", dict(sorted(by.items())), file=sys.stderr)


if __name__ == "__main__":
    main()
