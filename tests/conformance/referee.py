"""The providers' own SDK code as referees of portcullis's exports.

Reads the exports written by `tests/conformance.rs` (a JSON list of
`{"profile", "tool", "definition"}`) and prints a JSON list of the cases a
referee refused, with the referee's words. Exit status 0 when every case
passed, 1 when some did not, 2 when an SDK is missing.
"""

import copy
import json
import sys

try:
    import anthropic
    import mcp.types
    import openai.types.chat
    import openai.types.responses
    import pydantic
    from agents.strict_schema import ensure_strict_json_schema
    from google.genai import types as genai
except ImportError as missing:
    print(f"a referee SDK is not installed: {missing}", file=sys.stderr)
    sys.exit(2)


def shape(type_, value):
    pydantic.TypeAdapter(type_).validate_python(value, strict=False)


def openai_strict(parameters):
    refereed = ensure_strict_json_schema(copy.deepcopy(parameters))
    if refereed != parameters:
        raise ValueError(
            "not a fixed point of ensure_strict_json_schema; it becomes "
            + json.dumps(refereed, sort_keys=True)
        )


def anthropic_strict(schema):
    refereed = anthropic.transform_schema(copy.deepcopy(schema))
    if refereed != schema:
        raise ValueError(
            "changed by anthropic.transform_schema into " + json.dumps(refereed, sort_keys=True)
        )


def as_json_schema(node):
    """Gemini's OpenAPI `nullable` written back as JSON Schema's type union with null."""
    if isinstance(node, list):
        return [as_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key in ("properties",):
            out[key] = {name: as_json_schema(schema) for name, schema in value.items()}
        elif key in ("items", "anyOf"):
            out[key] = as_json_schema(value)
        elif key != "nullable":
            out[key] = value
    if node.get("nullable"):
        if "type" in out:
            out["type"] = [out["type"], "null"]
        elif "anyOf" in out:
            out["anyOf"] = out["anyOf"] + [{"type": "null"}]
    return out


def keys_anywhere(node):
    if isinstance(node, dict):
        for key, value in node.items():
            yield key
            yield from keys_anywhere(value)
    elif isinstance(node, list):
        for item in node:
            yield from keys_anywhere(item)


def gemini_parameters(declaration):
    genai.FunctionDeclaration.model_validate(declaration)
    parameters = declaration["parameters"]
    # The Developer API refuses `additionalProperties`, though the SDK's model has the field.
    if "additionalProperties" in keys_anywhere(parameters):
        raise ValueError("additionalProperties is refused by the Gemini Developer API")
    # Gemini's OpenAPI subset: unknown keywords are refused (extra="forbid").
    genai.Schema.model_validate(parameters)
    genai.Schema.from_json_schema(
        json_schema=genai.JSONSchema.model_validate(as_json_schema(parameters)),
        api_option="GEMINI_API",
        raise_error_on_unsupported_field=True,
    )


def referee(profile, definition):
    if profile == "openai-chat":
        shape(openai.types.chat.ChatCompletionFunctionToolParam, definition)
    elif profile == "openai-chat-strict":
        shape(openai.types.chat.ChatCompletionFunctionToolParam, definition)
        openai_strict(definition["function"]["parameters"])
    elif profile == "openai-responses":
        shape(openai.types.responses.FunctionToolParam, definition)
    elif profile == "openai-responses-strict":
        shape(openai.types.responses.FunctionToolParam, definition)
        openai_strict(definition["parameters"])
    elif profile == "anthropic":
        shape(anthropic.types.ToolParam, definition)
    elif profile == "anthropic-strict":
        shape(anthropic.types.ToolParam, definition)
        anthropic_strict(definition["input_schema"])
    elif profile == "gemini":
        gemini_parameters(definition)
    elif profile == "gemini-json-schema":
        genai.FunctionDeclaration.model_validate(definition)
    elif profile == "mcp":
        mcp.types.Tool.model_validate(definition, strict=True)
    else:
        raise ValueError(f"no referee for profile {profile}")


def main(path):
    with open(path, encoding="utf-8") as file:
        cases = json.load(file)
    refused = []
    for case in cases:
        try:
            referee(case["profile"], case["definition"])
        except Exception as error:  # every refusal is reported, whatever its type
            refused.append(
                {"profile": case["profile"], "tool": case["tool"], "referee": f"{type(error).__name__}: {error}"}
            )
    print(json.dumps({"checked": len(cases), "refused": refused}, indent=2))
    return 1 if refused else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
