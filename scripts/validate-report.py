#!/usr/bin/env python3
"""Validates a fieldguard report against its format's schema (tests/schemas, see SOURCE.md).

usage: validate-report.py sarif|junit|json FILE

json: fieldguard's own report format, against docs/check-report.schema.json.
"""
import json
import pathlib
import sys

SCHEMAS = pathlib.Path(__file__).resolve().parent.parent / "tests" / "schemas"


def main() -> int:
    kind, path = sys.argv[1], sys.argv[2]
    if kind == "sarif":
        import jsonschema

        schema = json.loads((SCHEMAS / "sarif-2.1.0-rtm.4.json").read_text())
        doc = json.loads(pathlib.Path(path).read_text())
        validator = jsonschema.Draft4Validator(schema)
        errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.path))
        for e in errors:
            print(f"{'/'.join(map(str, e.path))}: {e.message}")
        return 1 if errors else 0
    if kind == "json":
        import jsonschema

        schema = json.loads((SCHEMAS.parent.parent / "docs" / "check-report.schema.json").read_text())
        doc = json.loads(pathlib.Path(path).read_text())
        validator = jsonschema.Draft7Validator(schema)
        errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.path))
        for e in errors:
            print(f"{'/'.join(map(str, e.path))}: {e.message}")
            for sub in sorted(e.context or [], key=lambda c: list(c.path))[:5]:
                print(f"  {'/'.join(map(str, sub.path))}: {sub.message}")
        return 1 if errors else 0
    if kind == "junit":
        import xmlschema

        schema = xmlschema.XMLSchema(str(SCHEMAS / "junit-10.xsd"))
        errors = list(schema.iter_errors(path))
        for e in errors:
            print(e)
        return 1 if errors else 0
    print(f"unknown report kind {kind}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
