"""Validates every document of a built tree against the schema its path has in the tree's own
OpenAPI document (api/v2/openapi.json), with a real JSON Schema 2020-12 validator.

Usage: python validate_tree.py TREE

Every file the manifest lists is checked: the root, meta, every page file (against its list's
200 schema), every record by id and by name, every sub-document. Path parameters are checked
too: each id and each name a document is published under must match the `id` parameter's
schema. Formats are asserted (`uri` through rfc3987, `date-time` through rfc3339-validator).

Prints one line per resource and a total; exits 1 listing the first failures.
"""

import gzip
import json
import re
import sys
from pathlib import Path

from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

MAX_SHOWN = 20


def main() -> int:
    tree = Path(sys.argv[1])
    document = json.loads((tree / "api/v2/openapi.json").read_text())
    manifest = json.loads((tree / "manifest.json").read_text())
    uri = "urn:gen:openapi"
    registry = Registry().with_resource(uri, Resource.from_contents(document, default_specification=DRAFT202012))
    paths = document["paths"]

    def validator_for(schema):
        return Draft202012Validator(
            {"$ref": uri + "#" + schema["$ref"][1:]} if "$ref" in schema else schema,
            registry=registry,
            format_checker=Draft202012Validator.FORMAT_CHECKER,
        )

    validators = {}

    def validator(path_key):
        if path_key not in validators:
            operation = paths[path_key]["get"]
            schema = operation["responses"]["200"]["content"]["application/json"]["schema"]
            validators[path_key] = validator_for(schema)
        return validators[path_key]

    def id_validator(path_key):
        key = ("id", path_key)
        if key not in validators:
            parameters = paths[path_key]["get"]["parameters"]
            resolved = [resolve(document, p["$ref"]) if "$ref" in p else p for p in parameters]
            (id_param,) = [p for p in resolved if p["name"] == "id"]
            validators[key] = validator_for(id_param["schema"])
        return validators[key]

    # the formats must really be asserted, or a bad url would pass unseen
    checker = Draft202012Validator.FORMAT_CHECKER
    assert not checker.conforms("not a uri", "uri"), "format 'uri' is not checked: is rfc3987 installed?"
    assert not checker.conforms("yesterday", "date-time"), "format 'date-time' is not checked"

    failures = []
    counts = {}
    segments = set(manifest["resources"])
    for rel in sorted(manifest["files"]):
        parts = rel.split("/")
        if rel == "api/v2/openapi.json":
            path_key, label = "/api/v2/openapi.json", "openapi"
        elif rel == "api/v2/index.json":
            path_key, label = "/api/v2/", "root"
        elif rel == "api/v2/meta/index.json":
            path_key, label = "/api/v2/meta/", "meta"
        elif rel == "api/v2/bulk-data/index.json":
            path_key, label = "/api/v2/bulk-data/", "bulk-data"
        elif parts[:3] == ["api", "v2", "bulk-data"] and len(parts) == 4 and rel.endswith(".ndjson.gz"):
            # a bulk-data file: its name as the path parameter says, every line a record of its
            # resource as the record's own path describes it
            operation = paths.get("/api/v2/bulk-data/{file}", {}).get("get")
            if operation is None:
                failures.append(f"{rel}: no path /api/v2/bulk-data/{{file}} in the document")
                continue
            (parameter,) = operation["parameters"]
            if not re.fullmatch(parameter["schema"]["pattern"], parts[3]):
                failures.append(f"{rel}: the name does not match {parameter['schema']['pattern']}")
            if "application/x-ndjson" not in operation["responses"]["200"]["content"]:
                failures.append(f"{rel}: the document gives another content type")
            segment = parts[3][: -len("-0123456789abcdef.ndjson.gz")]
            record = validator(f"/api/v2/{segment}/{{id}}/")
            with gzip.open(tree / rel, "rt", encoding="utf-8") as lines:
                for number, line in enumerate(lines, 1):
                    for error in record.iter_errors(json.loads(line)):
                        failures.append(f"{rel}:{number}: {error.message[:300]}")
            counts["bulk-data files"] = counts.get("bulk-data files", 0) + 1
            continue
        elif parts[:2] == ["api", "v2"] and parts[-1] == "index.json" and parts[2] in segments:
            segment, middle = parts[2], parts[3:-1]
            label = segment
            if not middle or middle[0] == "_pages":
                path_key = f"/api/v2/{segment}/"
            elif middle == ["_names"]:
                path_key = f"/api/v2/{segment}/_names/"
            elif middle[:1] == ["_names"]:
                path_key = f"/api/v2/{segment}/_names/{{shard}}/"
            elif middle[:1] == ["_filters"] and len(middle) == 2:
                path_key = f"/api/v2/{segment}/_filters/{middle[1]}/"
            elif middle[:1] == ["_filters"]:
                # a value list's pages are pages of that list
                path_key = f"/api/v2/{segment}/_filters/{middle[1]}/{{value}}/"
            else:
                key, sub = middle[0], middle[1:]
                path_key = f"/api/v2/{segment}/{{id}}/" + "".join(s + "/" for s in sub)
                value = int(key) if re.fullmatch(r"-?[0-9]+", key) else key
                for error in id_validator(path_key).iter_errors(value):
                    failures.append(f"{rel}: path parameter {key!r}: {error.message}")
        else:
            failures.append(f"{rel}: a file the OpenAPI document does not describe")
            continue
        if path_key not in paths:
            failures.append(f"{rel}: no path {path_key} in the document")
            continue
        instance = json.loads((tree / rel).read_bytes())
        for error in validator(path_key).iter_errors(instance):
            where = "/".join(str(p) for p in error.absolute_path)
            failures.append(f"{rel}: at /{where}: {error.message[:300]}")
        counts[label] = counts.get(label, 0) + 1

    for label in sorted(counts):
        print(f"  {label}: {counts[label]} documents valid")
    total = sum(counts.values())
    if failures:
        print(f"{len(failures)} failures in {total} documents:", file=sys.stderr)
        for failure in failures[:MAX_SHOWN]:
            print("  " + failure, file=sys.stderr)
        return 1
    if total == 0:
        print("no documents found: is this a tree built by gen?", file=sys.stderr)
        return 1
    print(f"{total} documents valid against {tree / 'api/v2/openapi.json'} (jsonschema {jsonschema_version()})")
    return 0


def resolve(document, ref):
    node = document
    for part in ref.lstrip("#/").split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def jsonschema_version():
    from importlib.metadata import version

    return version("jsonschema")


if __name__ == "__main__":
    sys.exit(main())
