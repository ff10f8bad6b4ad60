"""Validates an OpenAPI document with openapi-spec-validator (which detects the version, 3.1
here, and checks the document against the specification's schema and its rules: resolvable
`$ref`s, path parameters declared, unique operation ids, ...).

Usage: python check_openapi.py FILE
"""

import json
import sys
from importlib.metadata import version

from openapi_spec_validator import validate
from openapi_spec_validator.validation.exceptions import OpenAPIValidationError


def main() -> int:
    path = sys.argv[1]
    with open(path, encoding="utf-8") as f:
        document = json.load(f)
    if document.get("openapi") != "3.1.0":
        print(f"{path}: openapi is {document.get('openapi')!r}, expected '3.1.0'", file=sys.stderr)
        return 1
    try:
        validate(document)
    except OpenAPIValidationError as error:
        print(f"{path}: not a valid OpenAPI 3.1 document: {error}", file=sys.stderr)
        return 1
    paths = len(document["paths"])
    print(f"{path}: valid OpenAPI 3.1 ({paths} paths; openapi-spec-validator {version('openapi-spec-validator')})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
