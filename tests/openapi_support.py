"""What the tests of the OpenAPI document share: where it is served, and checks of real answers against it."""

from __future__ import annotations

import re
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

PREFIX = "/lowkiq"


DOC = "/api/v1/openapi.json"


DOC_URI = "urn:lowkiq:openapi"


# Values for the documented path and required query parameters.
PATH_VALUES = {"worker": "OrdersWorker", "job_id": "all3", "tag": "vip", "group": "acme"}


def escape(segment: str) -> str:
    return segment.replace("~", "~0").replace("/", "~1")


class Spec:
    """A served document, and the checks of real answers against it."""

    def __init__(self, doc: dict[str, Any]) -> None:
        self.doc = doc
        resource = Resource.from_contents(doc, default_specification=DRAFT202012)
        self.registry = Registry().with_resource(DOC_URI, resource)

    def operation(self, path: str, method: str) -> dict[str, Any]:
        return self.doc["paths"][path][method.lower()]

    def deref(self, obj: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in obj:
            obj = self.at(obj["$ref"].removeprefix("#"))
        return obj

    def at(self, pointer: str) -> Any:
        found: Any = self.doc
        for segment in pointer.lstrip("/").split("/"):
            found = found[segment.replace("~1", "/").replace("~0", "~")]
        return found

    def validator(self, pointer: str) -> Draft202012Validator:
        return Draft202012Validator({"$ref": f"{DOC_URI}#{pointer}"}, registry=self.registry)

    def response_pointer(self, path: str, method: str, status: int) -> str:
        responses = self.operation(path, method)["responses"]
        assert str(status) in responses, f"{method} {path} answered {status}, which the document does not list"
        pointer = "/" + "/".join(escape(s) for s in ("paths", path, method.lower(), "responses", str(status)))
        ref = responses[str(status)].get("$ref")
        if ref:
            pointer = ref.removeprefix("#")
        return pointer + "/content/application~1json/schema"

    def check(self, reply: Any, path: str, method: str = "get") -> Any:
        """Validates a real answer against the schema of its status; returns its JSON."""
        assert reply.mimetype == "application/json", (path, reply.status_code, reply.data[:200])
        data = reply.get_json()
        self.validator(self.response_pointer(path, method, reply.status_code)).validate(data)
        return data

    def check_body(self, body: Any, path: str) -> None:
        pointer = "/" + "/".join(escape(s) for s in ("paths", path, "post", "requestBody"))
        self.validator(pointer + "/content/application~1json/schema").validate(body)

    def check_error(self, reply: Any, name: str) -> None:
        """An answer from outside any operation (an unrouted 405) against a component response."""
        assert reply.mimetype == "application/json"
        self.validator(f"/components/responses/{name}/content/application~1json/schema").validate(reply.get_json())


def url(path: str, **params: str) -> str:
    values = {**PATH_VALUES, **params}
    return PREFIX + re.sub(r"\{([^}]+)\}", lambda m: values[m.group(1)], path)
