#!/usr/bin/env python3
"""Runs the cases of immutable.yaml against a real kube-apiserver and checks each one.

    python3 tests/data/kubeapi/verify-immutable.py KUBECONFIG [immutable.yaml] [--only NAME ...] [--show]

For every case, in file order: its `before` manifests and its `base` are applied server-side
by field manager "base" (each must be accepted), its `status` (if any) is merge-patched into
the object's /status subresource, then `refused` is applied by manager "change" with
force=true (the server must answer 422 with exactly the recorded `causes`, each
"field|reason|message"), then `allowed` is applied by "change" with force=true (it must be
accepted). Namespaced objects go in namespace `immutable`, created here if missing. A custom
resource's `base` waits (up to 30 s) until its kind is served.

Causes are compared in any order but with their multiplicity: the server reports some errors
twice (every `metadata` error: once from the registry's common checks, `rest.BeforeUpdate`, and
once from the kind's own `ValidateObjectMetaUpdate`), and the file records them as sent.

The kubeconfig's current context is used (its cluster's server and CA, its user's bearer token
or client certificate). Run it against a fresh server: cases create objects by fixed names.
--only runs the named cases; --show also prints what the server answered for each refused
apply (as `causes:` lines to paste).

Python 3 standard library only, but for the YAML of the data file and the kubeconfig: PyYAML
when it is importable, otherwise the file must be JSON.
"""

import json
import os
import ssl
import sys
import time
import urllib.error
import urllib.request

try:
    import yaml  # PyYAML

    def load_yaml(text):
        return yaml.safe_load(text)

except ImportError:  # pragma: no cover

    def load_yaml(text):
        try:
            return json.loads(text)
        except ValueError:
            sys.exit("verify-immutable: PyYAML is not installed (python3 -m pip install pyyaml, or run .venv/bin/python)")


NAMESPACE = "immutable"


class Client:
    def __init__(self, kubeconfig):
        with open(kubeconfig) as f:
            cfg = load_yaml(f.read())
        ctx_name = cfg.get("current-context")
        ctx = next(c["context"] for c in cfg["contexts"] if c["name"] == ctx_name)
        cluster = next(c["cluster"] for c in cfg["clusters"] if c["name"] == ctx["cluster"])
        user = next(u["user"] for u in cfg["users"] if u["name"] == ctx["user"])
        self.server = cluster["server"].rstrip("/")
        self.ssl = ssl.create_default_context(cafile=cluster.get("certificate-authority"))
        if cluster.get("insecure-skip-tls-verify"):
            self.ssl.check_hostname = False
            self.ssl.verify_mode = ssl.CERT_NONE
        self.headers = {"Accept": "application/json"}
        if user.get("token"):
            self.headers["Authorization"] = "Bearer " + user["token"]
        elif user.get("client-certificate"):
            self.ssl.load_cert_chain(user["client-certificate"], user.get("client-key"))
        self.resources = {}

    def request(self, method, path, body=None, content_type=None):
        data = None if body is None else json.dumps(body).encode()
        headers = dict(self.headers)
        if content_type:
            headers["Content-Type"] = content_type
        req = urllib.request.Request(self.server + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, context=self.ssl, timeout=60) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                return e.code, json.loads(raw)
            except ValueError:
                return e.code, {"message": raw.decode(errors="replace")}

    def resource(self, api_version, kind):
        """(plural, namespaced) of a kind, from discovery."""
        key = (api_version, kind)
        if key not in self.resources:
            base = "/api/v1" if api_version == "v1" else "/apis/" + api_version
            code, body = self.request("GET", base)
            if code != 200:
                raise RuntimeError(f"discovery of {api_version}: {code} {body}")
            for r in body["resources"]:
                if "/" not in r["name"]:
                    self.resources[(api_version, r["kind"])] = (r["name"], r["namespaced"])
            if key not in self.resources:
                raise RuntimeError(f"no resource for {api_version} {kind}")
        return self.resources[key]

    def url(self, obj, subresource=None):
        api_version, kind = obj["apiVersion"], obj["kind"]
        plural, namespaced = self.resource(api_version, kind)
        base = "/api/v1" if api_version == "v1" else "/apis/" + api_version
        ns = f"/namespaces/{obj.get('metadata', {}).get('namespace') or NAMESPACE}" if namespaced else ""
        url = f"{base}{ns}/{plural}/{obj['metadata']['name']}"
        return url + (f"/{subresource}" if subresource else "")

    def apply(self, obj, manager, force=False):
        q = f"?fieldManager={manager}" + ("&force=true" if force else "")
        return self.request("PATCH", self.url(obj) + q, obj, "application/apply-patch+yaml")

    def patch_status(self, obj, status):
        body = {"status": status}
        return self.request("PATCH", self.url(obj, "status"), body, "application/merge-patch+json")


def causes(body):
    out = []
    for c in (body or {}).get("details", {}).get("causes", []) or []:
        out.append(f"{c.get('field', '')}|{c.get('reason', '')}|{c.get('message', '')}")
    return out


def ok(code):
    return 200 <= code < 300


def ensure_namespace(client):
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    code, body = client.apply(ns, "verify")
    if not ok(code):
        raise RuntimeError(f"namespace {NAMESPACE}: {code} {body.get('message')}")
    # Pods need the namespace's default service account (the serviceaccount controller's).
    for _ in range(300):
        code, _ = client.request("GET", f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/default")
        if code == 200:
            return
        time.sleep(0.1)
    raise RuntimeError("no default service account in namespace " + NAMESPACE)


def create(client, obj):
    """Applies `obj` as manager "base", waiting up to 30 s for its resource to be served (the
    kind of a custom resource whose definition was just created)."""
    for _ in range(300):
        try:
            code, body = client.apply(obj, "base")
        except RuntimeError:  # not in discovery yet
            code, body = 404, {"message": "not served yet"}
        if code != 404:
            return code, body
        client.resources.clear()
        time.sleep(0.1)
    return code, body


def run_case(client, case, show):
    """The problems found with one case ([] when it passed)."""
    name = case["name"]
    problems = []
    for m in case.get("before") or []:
        code, body = create(client, m)
        if not ok(code):
            return [f"before {m['kind']}/{m['metadata']['name']}: {code} {body.get('message')}"]
    code, body = create(client, case["base"])
    if not ok(code):
        return [f"base: {code} {body.get('message')}"]
    if case.get("status"):
        code, body = client.patch_status(case["base"], case["status"])
        if not ok(code):
            return [f"status: {code} {body.get('message')}"]
    code, body = client.apply(case["refused"], "change", force=True)
    got = causes(body)
    if show:
        print(f"# {name}: {code}")
        if code != 422:
            print(f"#   message: {body.get('message') if isinstance(body, dict) else body}")
        print("  causes:")
        for c in got:
            print("    - " + json.dumps(c))
    if code != 422:
        problems.append(f"refused: answered {code}, not 422: {body.get('message') if isinstance(body, dict) else ''}")
    elif sorted(got) != sorted(case.get("causes") or []):
        want = list(case.get("causes") or [])
        extra = list(got)
        for c in list(want):
            if c in extra:
                extra.remove(c)
                want.remove(c)
        for c in want:
            problems.append("refused: missing cause " + json.dumps(c))
        for c in extra:
            problems.append("refused: unexpected cause " + json.dumps(c))
    code, body = client.apply(case["allowed"], "change", force=True)
    if not ok(code):
        problems.append(f"allowed: answered {code}: {body.get('message')}")
        if show:
            for c in causes(body):
                print("#   allowed cause: " + json.dumps(c))
    return problems


def check_file(cases):
    """Problems with the file itself (names unique, required keys present)."""
    problems, seen = [], set()
    for i, c in enumerate(cases):
        name = c.get("name")
        if not name or name in seen:
            problems.append(f"case {i}: missing or duplicate name {name!r}")
        seen.add(name)
        for k in ("rule", "base", "refused", "causes", "allowed"):
            if k not in c:
                problems.append(f"{name}: no {k}")
    return problems


def main(argv):
    args = [a for a in argv if not a.startswith("--")]
    show = "--show" in argv
    only = []
    if "--only" in argv:
        i = argv.index("--only")
        only = [a for a in argv[i + 1 :] if not a.startswith("--")]
        args = [a for a in args if a not in only]
    if not args:
        print(__doc__, file=sys.stderr)
        return 2
    kubeconfig = args[0]
    path = args[1] if len(args) > 1 else os.path.join(os.path.dirname(__file__), "immutable.yaml")
    with open(path) as f:
        cases = load_yaml(f.read())
    failed = check_file(cases)
    for p in failed:
        print("FILE " + p)
    client = Client(kubeconfig)
    ensure_namespace(client)
    passed = 0
    for case in cases:
        if only and case["name"] not in only:
            continue
        problems = run_case(client, case, show)
        if problems:
            failed.append(case["name"])
            print(f"FAIL {case['name']} ({case['rule']})")
            for p in problems:
                print("     " + p)
        else:
            passed += 1
            print(f"ok   {case['name']}")
    print(f"{passed} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
