"""openai-python, unmodified, against Hearth's Responses API: `responses.create` (a string with instructions, and
items), `responses.stream` through a function tool round trip (its output sent back by previous_response_id),
`responses.parse` of a pydantic model with bounds and a datetime, and a stored response read back, its input items
listed, then deleted."""

import json

from hearth_checks import API_KEY, BASE_URL, MODEL, Meeting, meeting, run_checks, type_name
from openai import NotFoundError, OpenAI

client = OpenAI(base_url=BASE_URL, api_key=API_KEY, max_retries=0)

GET_WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Current weather in a city",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string", "maxLength": 30}},
        "required": ["city"],
        "additionalProperties": False,
    },
    "strict": True,
}


def summary(response) -> dict:
    """What the tests assert on a finished response, whatever the model said."""
    usage = response.usage
    return {
        "id": response.id,
        "status": response.status,
        "incomplete_reason": response.incomplete_details.reason if response.incomplete_details else None,
        "output_types": [item.type for item in response.output],
        "output_text": response.output_text,
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
        "cached_tokens": usage.input_tokens_details.cached_tokens,
        "reasoning_tokens": usage.output_tokens_details.reasoning_tokens,
    }


def create_string() -> dict:
    response = client.responses.create(
        model=MODEL,
        instructions="You are a helpful assistant. Answer in one short sentence.",
        input="Say hello.",
        temperature=0,
        max_output_tokens=24,
    )
    return {**summary(response), "instructions": response.instructions}


def create_items() -> dict:
    response = client.responses.create(
        model=MODEL,
        input=[
            {"role": "developer", "content": "Answer with one word."},
            {"role": "user", "content": "My name is Alice."},
            {"role": "assistant", "content": "Hello Alice!"},
            {"role": "user", "content": [{"type": "input_text", "text": "What is my name?"}]},
        ],
        temperature=0,
        max_output_tokens=16,
    )
    return summary(response)


def stream_tool_round_trip() -> dict:
    with client.responses.stream(
        model=MODEL,
        input="What is the weather in Paris right now?",
        tools=[GET_WEATHER],
        # A 135M model does not reliably choose a tool on its own: the call is what this check is about.
        tool_choice={"type": "function", "name": "get_weather"},
        temperature=0,
        # Room to end by itself: at the bound the response is "incomplete" (as OpenAI's), and the SDK's
        # get_final_response() wants response.completed. Greedy output still varies with what it is batched with.
        max_output_tokens=200,
    ) as stream:
        events = [event for event in stream]
        first = stream.get_final_response()
    call = next(item for item in first.output if item.type == "function_call")
    arguments = json.loads(call.arguments)
    with client.responses.stream(
        model=MODEL,
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": json.dumps({"sky": "sunny"})}],
        tools=[GET_WEATHER],
        tool_choice="none",
        temperature=0,
        max_output_tokens=256,
    ) as stream:
        text = "".join(event.delta for event in stream if event.type == "response.output_text.delta")
        answer = stream.get_final_response()
    return {
        "event_types": [event.type for event in events],
        "sequence_numbers": [event.sequence_number for event in events],
        "first": summary(first),
        "call_name": call.name,
        "city_type": type_name(arguments.get("city")),
        "answer": summary(answer),
        "answer_previous_response_id": answer.previous_response_id,
        "first_id": first.id,
        "streamed_text": text,
    }


def parse() -> dict:
    response = client.responses.parse(
        model=MODEL,
        input="Plan a team meeting next Monday at 10:00: title, priority 1-10, start.",
        text_format=Meeting,
        temperature=0,
        max_output_tokens=100,
    )
    return meeting(response.output_parsed)


def stored() -> dict:
    created = client.responses.create(
        model=MODEL,
        input=[
            {"role": "user", "content": "Remember the word papaya."},
            {"role": "user", "content": "Say OK."},
        ],
        temperature=0,
        max_output_tokens=8,
    )
    retrieved = client.responses.retrieve(created.id)
    items = list(client.responses.input_items.list(created.id, limit=1, order="asc"))
    texts = ["".join(part.text for part in item.content) for item in items if item.type == "message"]
    client.responses.delete(created.id)
    try:
        client.responses.retrieve(created.id)
        after_delete = "found"
    except NotFoundError as error:
        after_delete = error.status_code
    return {
        "same_id": retrieved.id == created.id,
        "same_output": retrieved.model_dump()["output"] == created.model_dump()["output"],
        "input_texts": texts,
        "after_delete": after_delete,
    }


if __name__ == "__main__":
    run_checks(
        {
            "create_string": create_string,
            "create_items": create_items,
            "stream_tool_round_trip": stream_tool_round_trip,
            "parse": parse,
            "stored": stored,
        }
    )
