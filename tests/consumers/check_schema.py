#!/usr/bin/env python3
"""check_schema.py SCHEMA FILE: FILE (JSON) validates against SCHEMA with jsonschema's
Draft 2020-12 validator; SCHEMA itself must be a valid 2020-12 schema. Reports the first error
by its place in FILE (JSON pointer) and the schema's message."""
import sys

import jsonschema
from jsonschema import Draft202012Validator

from _common import CheckFailed, main, read_json


def check(argv):
    if len(argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        sys.exit(2)
    schema, instance = read_json(argv[0]), read_json(argv[1])
    if schema.get("$schema") != "https://json-schema.org/draft/2020-12/schema":
        raise CheckFailed("%s: $schema is not Draft 2020-12" % argv[0])
    try:
        Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as e:
        raise CheckFailed("%s: not a valid schema: %s" % (argv[0], e.message))
    v = Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
    errors = sorted(v.iter_errors(instance), key=lambda e: list(e.absolute_path))
    if errors:
        e = errors[0]
        where = "/" + "/".join(str(p) for p in e.absolute_path)
        raise CheckFailed("%s at %s: %s" % (argv[1], where, e.message))
    return "%s is valid against %s (jsonschema %s, Draft 2020-12)" % (
        argv[1], argv[0], _version())


def _version():
    from importlib.metadata import version
    return version("jsonschema")


if __name__ == "__main__":
    sys.exit(main(check))
