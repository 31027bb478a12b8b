#!/usr/bin/env python3
"""Validate an `oajail audit` report against a published schema.

Usage: validate.py junit FILE | validate.py sarif FILE
Exits 0 when FILE is valid, 1 with the validator's message otherwise.
Needs `xmlschema` and `jsonschema` (installed by .ci/install-deps).
"""
import json
import pathlib
import sys

here = pathlib.Path(__file__).parent
kind, path = sys.argv[1], sys.argv[2]
try:
    if kind == "junit":
        import xmlschema

        xmlschema.XMLSchema(str(here / "junit-10.xsd")).validate(path)
    elif kind == "sarif":
        import jsonschema

        schema = json.loads((here / "sarif-2.1.0.json").read_text())
        jsonschema.Draft4Validator(schema).validate(json.loads(pathlib.Path(path).read_text()))
    else:
        sys.exit(f"validate.py: unknown kind {kind}")
except Exception as e:  # the validator's own error names the offending element
    print(f"invalid {kind}: {e}", file=sys.stderr)
    sys.exit(1)
print(f"valid {kind}: {path}")
