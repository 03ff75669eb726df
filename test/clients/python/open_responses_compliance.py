"""The Open Responses compliance checks against Hearth, over plain HTTP as the specification's own runner sends them.

The specification's compliance suite (its test templates and its CLI runner) is published only as source in the
specification's repository, not as a package: these checks are written here after its templates (the same ids, the
same kind of request, the same validators), in our own words. Its response and streaming-event schema comes from
the `openresponses-types` package (Apache-2.0, pydantic models generated from the specification's OpenAPI document,
pinned in requirements.txt): every response body and every SSE event is validated against it, strictly (no
coercion), as the suite's zod schemas do.

Each check reports what the tests assert on: the HTTP status, the schema errors (none expected), the response's
status and output item types, and for streams the event types in order.
"""

import json
from enum import Enum
from collections.abc import Callable
from typing import Any

import httpx
import openresponses_types as spec
from hearth_checks import API_KEY, BASE_URL, MODEL, run_checks
from pydantic import BaseModel, ValidationError

http = httpx.Client(base_url=BASE_URL, headers={"Authorization": f"Bearer {API_KEY}"}, timeout=120)

WEATHER_TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "Get the current weather for a location",
    "parameters": {
        "type": "object",
        "properties": {"location": {"type": "string", "description": "A city and its region, e.g. Lyon, France"}},
        "required": ["location"],
    },
}

# A 2x2 red PNG, base64: a real image for the image-input check (a text-only model must refuse it).
TINY_PNG = "iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAEElEQVR4nGP4z8AARAwQCgAf7gP9i18U1AAAAABJRU5ErkJggg=="
# A one-page PDF, base64: the file-input check's attachment.
TINY_PDF = (
    "JVBERi0xLjEKMSAwIG9iaiA8PCAvVHlwZSAvQ2F0YWxvZyAvUGFnZXMgMiAwIFIgPj4gZW5kb2JqCjIgMCBvYmogPDwgL1R5cGUgL1BhZ2VzIC9L"
    "aWRzIFszIDAgUl0gL0NvdW50IDEgPj4gZW5kb2JqCjMgMCBvYmogPDwgL1R5cGUgL1BhZ2UgL1BhcmVudCAyIDAgUiAvTWVkaWFCb3ggWzAgMCAy"
    "MDAgMTAwXSA+PiBlbmRvYmoKdHJhaWxlciA8PCAvUm9vdCAxIDAgUiA+PgolJUVPRgo="
)


def _event_models() -> dict[str, type[BaseModel]]:
    """Every streaming event of the specification, by its `type` (each model's `type` is a one-value enum)."""
    models: dict[str, type[BaseModel]] = {}
    for name in dir(spec):
        model = getattr(spec, name)
        if not (isinstance(model, type) and issubclass(model, BaseModel) and name.endswith("StreamingEvent")):
            continue
        annotation = model.model_fields["type"].annotation
        if isinstance(annotation, type) and issubclass(annotation, Enum):
            for value in annotation:
                models[value.value] = model
    return models


EVENT_MODELS = _event_models()


def schema_errors(model: type[BaseModel], raw: str) -> list[str]:
    try:
        model.model_validate_json(raw, strict=True)
        return []
    except ValidationError as error:
        return [f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in error.errors(include_url=False)]


def summary(response: dict[str, Any]) -> dict[str, Any]:
    return {
        "status": response.get("status"),
        "output_types": [item.get("type") for item in response.get("output") or []],
        "id": response.get("id"),
    }


# Greedy unless a check says otherwise: "completed" needs the model to end by itself, and a sampled 135M reply can
# ramble to the context's end ("incomplete", as OpenAI's would be; seen once in a fresh-clone run). A greedy one can
# too, on some CPUs: see `until_ended`.
GREEDY: dict[str, Any] = {"temperature": 0}


def create(body: dict[str, Any]) -> dict[str, Any]:
    """A non-streamed request: its status, schema errors, and the response (or the error body)."""
    reply = http.post("/responses", json={**GREEDY, **body, "stream": False})
    if reply.status_code != 200:
        return {"http_status": reply.status_code, "error": reply.json().get("error")}
    return {
        "http_status": 200,
        "schema_errors": schema_errors(spec.ResponseResource, reply.text),
        **summary(reply.json()),
    }


def stream(body: dict[str, Any]) -> dict[str, Any]:
    """A streamed request: every event validated by its type, the final response validated as a ResponseResource."""
    events: list[dict[str, Any]] = []
    errors: list[str] = []
    final: dict[str, Any] | None = None
    with http.stream("POST", "/responses", json={**GREEDY, **body, "stream": True}) as reply:
        if reply.status_code != 200:
            reply.read()
            return {"http_status": reply.status_code, "error": reply.json().get("error")}
        data: list[str] = []
        for line in reply.iter_lines():
            if line.startswith("data:"):
                data.append(line[5:].strip())
            elif line == "" and data:
                raw = "\n".join(data)
                data = []
                if raw == "[DONE]":
                    continue
                event = json.loads(raw)
                events.append(event)
                model = EVENT_MODELS.get(event.get("type"))
                if model is None:
                    errors.append(f"unknown event type {event.get('type')!r}")
                else:
                    errors += [f"{event.get('type')}: {e}" for e in schema_errors(model, raw)]
                if event.get("type") in ("response.completed", "response.failed", "response.incomplete"):
                    final = event["response"]
                    errors += [f"final response: {e}" for e in schema_errors(spec.ResponseResource, json.dumps(final))]
    return {
        "http_status": 200,
        "schema_errors": errors,
        "event_types": [event.get("type") for event in events],
        "item_types": {
            event["type"]: [e["item"]["type"] for e in events if e.get("type") == event["type"]]
            for event in events
            if event.get("type") in ("response.output_item.added", "response.output_item.done")
        },
        "sequence_numbers": [event.get("sequence_number") for event in events],
        **(summary(final) if final is not None else {"status": None, "output_types": []}),
    }


# A free-text reply ends when the model stops, and where a 135M model stops depends on the CPU's arithmetic: on an
# Intel Xeon (AVX-512, 2026-11-27) its greedy answer to "Count from 1 to 5." went on counting to the context's end,
# where on AMD EPYC it stopped after "5". Such a reply is rightly "incomplete"; the check is of the protocol, so a
# request that ran to the bound is sent again, sampled as the model's defaults sample (temperature 0.2), at most
# twice. Every attempt's body or events must be schema-valid.
RETRIES: list[dict[str, Any]] = [{"temperature": 0.2}, {"temperature": 0.2}]


def until_ended(run: Any, body: dict[str, Any]) -> dict[str, Any]:
    """`run(body)` (create or stream) until its response is not cut by max_output_tokens, at most three times."""
    errors: list[str] = []
    attempts = 0
    for sampling in [{}, *RETRIES]:
        attempts += 1
        # 256 tokens bound what an attempt that never ends costs (a greedy one ran to 2,010, the context's end).
        result = run({**body, "max_output_tokens": 256, **sampling})
        errors += result.get("schema_errors") or []
        if result.get("status") != "incomplete":
            break
    return {**result, "schema_errors": errors, "attempts": attempts}


def user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": text}


def two_turns(first: dict[str, Any], second: Callable[[dict[str, Any]], dict[str, Any]]) -> dict[str, Any]:
    """The first request's response id carried into the second as previous_response_id.

    The first turn is greedy and bounded (its status is not checked, only its schema): a sampled first reply once
    rambled to 2,010 tokens, and the second turn, which carries it, then exceeded the context (a rightful 400). The
    second turn must complete, as `until_ended` gives it the chance to."""
    reply = http.post("/responses", json={**GREEDY, "max_output_tokens": 128, **first, "stream": False})
    if reply.status_code != 200:
        return {"http_status": reply.status_code, "error": reply.json().get("error"), "turn": 1}
    response = reply.json()
    result = until_ended(create, {**second(response), "previous_response_id": response["id"]})
    result["first"] = {"schema_errors": schema_errors(spec.ResponseResource, reply.text), **summary(response)}
    return result


def function_call_roundtrip() -> dict[str, Any]:
    def output_of(response: dict[str, Any]) -> dict[str, Any]:
        call = next(item for item in response["output"] if item["type"] == "function_call")
        return {
            "model": MODEL,
            "input": [{"type": "function_call_output", "call_id": call["call_id"], "output": "18 degrees and clear"}],
        }

    return two_turns(
        {
            "model": MODEL,
            "input": "Use the weather tool to get the temperature in Lyon.",
            "tools": [WEATHER_TOOL],
            "tool_choice": {"type": "function", "name": "get_weather"},
        },
        output_of,
    )


CHECKS = {
    "basic-response": lambda: until_ended(create, {"model": MODEL, "input": [user("Say hello in three words.")]}),
    "streaming-response": lambda: until_ended(stream, {"model": MODEL, "input": [user("Count from 1 to 5.")]}),
    "system-prompt": lambda: until_ended(
        create,
        {
            "model": MODEL,
            "input": [
                {"type": "message", "role": "system", "content": "You are a sailor. Answer like one."},
                user("Say hello."),
            ],
        }
    ),
    # The suite leaves tool_choice to the model ("auto"); a 135M model answers in text instead of choosing the tool,
    # so these two require a tool call: the checks are of the function_call's shape and events, not of the model.
    "tool-calling": lambda: create(
        {
            "model": MODEL,
            "input": [user("What's the weather like in Lyon?")],
            "tools": [WEATHER_TOOL],
            "tool_choice": "required",
        }
    ),
    "tool-calling-streaming": lambda: stream(
        {
            "model": MODEL,
            "input": [user("What's the weather like in Lyon?")],
            "tools": [WEATHER_TOOL],
            "tool_choice": "required",
        }
    ),
    "function-call-roundtrip": function_call_roundtrip,
    "image-input": lambda: create(
        {
            "model": MODEL,
            "input": [
                {
                    "type": "message",
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": "What is in this picture? One sentence."},
                        {"type": "input_image", "image_url": f"data:image/png;base64,{TINY_PNG}"},
                    ],
                }
            ],
        }
    ),
    "file-input": lambda: create(
        {
            "model": MODEL,
            "input": [
                {
                    "type": "message",
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": "What is the title of the attached file?"},
                        {"type": "input_file", "filename": "doc.pdf", "file_data": f"data:application/pdf;base64,{TINY_PDF}"},
                    ],
                }
            ],
        }
    ),
    "multi-turn": lambda: until_ended(
        create,
        {
            "model": MODEL,
            "input": [
                user("My name is Alice."),
                {"type": "message", "role": "assistant", "content": "Hello Alice! How can I help you today?"},
                user("What is my name?"),
            ],
        }
    ),
    "previous-response-id": lambda: two_turns(
        {"model": MODEL, "input": "Remember this code word: papaya. Reply with only OK."},
        lambda _: {"model": MODEL, "input": "What code word did I ask you to remember?"},
    ),
    # Optional in the suite (they need a vector store, or a search index): Hearth runs no built-in tool and refuses
    # them, naming the tool.
    "file-search": lambda: create(
        {
            "model": MODEL,
            "input": "Search the vector store and summarize one result.",
            "tools": [{"type": "file_search", "vector_store_ids": ["vs_none"]}],
        }
    ),
    "offline-web-search": lambda: create(
        {
            "model": MODEL,
            "input": "Find the most relevant cached result for Open Responses.",
            "tools": [{"type": "web_search", "external_web_access": False}],
        }
    ),
}

if __name__ == "__main__":
    run_checks({**CHECKS, "event_types_known": lambda: sorted(EVENT_MODELS)})
