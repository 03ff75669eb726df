"""openai-python, unmodified, against Hearth: create, stream, `parse` (GA and beta) of a pydantic model with bounds
and a datetime, a strict pydantic tool, a non-strict tool whose schema carries bounds, an allowed_tools tool_choice,
the current SDK's newer request fields, and vLLM's sampling extensions through extra_body."""

import json

from hearth_checks import API_KEY, BASE_URL, MODEL, Meeting, meeting, run_checks, type_name
from openai import OpenAI, pydantic_function_tool
from pydantic import BaseModel, Field

client = OpenAI(base_url=BASE_URL, api_key=API_KEY, max_retries=0)


class GetForecast(BaseModel):
    """Weather forecast for a city."""

    city: str = Field(max_length=30)
    days: int = Field(ge=1, le=7)


MEETING_PROMPT = [{"role": "user", "content": "Plan a team meeting next Monday at 10:00: title, priority 1-10, start."}]
HELLO = [{"role": "user", "content": "Say hello."}]
FORECAST_PROMPT = [{"role": "user", "content": "What will the weather be in Paris for the next 3 days?"}]


def hello(**fields) -> dict:
    """A short request with `fields` added: the reply's text and finish reason."""
    request = {"temperature": 0, "max_tokens": 20, **fields}
    completion = client.chat.completions.create(model=MODEL, messages=HELLO, **request)
    choice = completion.choices[0]
    return {"content": choice.message.content, "finish_reason": choice.finish_reason}


def hello_stream(**stream_options) -> dict:
    """The same, streamed with `stream_options`: the text and the usage chunk's completion tokens."""
    chunks = client.chat.completions.create(
        model=MODEL,
        messages=HELLO,
        temperature=0,
        max_tokens=20,
        stream=True,
        stream_options={"include_usage": True, **stream_options},
    )
    text, usage = "", None
    for chunk in chunks:
        if chunk.choices:
            text += chunk.choices[0].delta.content or ""
        if chunk.usage is not None:
            usage = chunk.usage.completion_tokens
    return {"text": text, "completion_tokens": usage}


def parse() -> dict:
    completion = client.chat.completions.parse(
        model=MODEL, messages=MEETING_PROMPT, response_format=Meeting, temperature=0, seed=7, max_tokens=100
    )
    return meeting(completion.choices[0].message.parsed)


def beta_parse() -> dict:
    completion = client.beta.chat.completions.parse(
        model=MODEL, messages=MEETING_PROMPT, response_format=Meeting, temperature=0, seed=7, max_tokens=100
    )
    return meeting(completion.choices[0].message.parsed)


def forecast(args: GetForecast | dict) -> dict:
    days = args.days if isinstance(args, GetForecast) else args["days"]
    city = args.city if isinstance(args, GetForecast) else args["city"]
    return {"days": days, "days_type": type_name(days), "city_type": type_name(city)}


def strict_tool() -> dict:
    completion = client.chat.completions.parse(
        model=MODEL,
        messages=FORECAST_PROMPT,
        tools=[pydantic_function_tool(GetForecast)],
        tool_choice={"type": "function", "function": {"name": "GetForecast"}},
        temperature=0,
        max_tokens=60,
    )
    call = completion.choices[0].message.tool_calls[0]
    return {"name": call.function.name, **forecast(call.function.parsed_arguments)}


def non_strict_tool() -> dict:
    # A tool schema as a hand-written app sends it: not strict, bounds in it (a hint to OpenAI).
    tool = {
        "type": "function",
        "function": {
            "name": "get_forecast",
            "description": "Weather forecast",
            "parameters": GetForecast.model_json_schema(),
        },
    }
    completion = client.chat.completions.create(
        model=MODEL, messages=FORECAST_PROMPT, tools=[tool], tool_choice="required", temperature=0, max_tokens=60
    )
    call = completion.choices[0].message.tool_calls[0]
    return {"name": call.function.name, **forecast(json.loads(call.function.arguments))}


def allowed_tools() -> dict:
    get_time = {
        "type": "function",
        "function": {
            "name": "get_time",
            "description": "Current time in a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
    completion = client.chat.completions.create(
        model=MODEL,
        messages=FORECAST_PROMPT,
        tools=[pydantic_function_tool(GetForecast), get_time],
        # OpenAI's form: the request keeps every tool (a stable prompt), the call is restricted to the listed ones.
        tool_choice={
            "type": "allowed_tools",
            "allowed_tools": {"mode": "required", "tools": [{"type": "function", "function": {"name": "get_time"}}]},
        },
        temperature=0,
        max_tokens=40,
    )
    calls = completion.choices[0].message.tool_calls or []
    city = json.loads(calls[0].function.arguments)["city"] if calls else None
    return {"names": [call.function.name for call in calls], "city_type": type_name(city)}


def sdk_fields() -> dict:
    # Fields of the SDK's current ChatCompletionCreateParams that apps pass through to any OpenAI-compatible server.
    return hello(
        verbosity="low",
        reasoning_effort="none",
        prompt_cache_key="hearth-clients-tier",
        prompt_cache_retention="24h",
        safety_identifier="user-1",
        store=False,
    )


def sampling_extensions() -> dict:
    # vLLM's sampling parameters, as open-model cards tell users to send them.
    return hello(temperature=0.7, seed=7, extra_body={"top_k": 20, "min_p": 0.05, "repetition_penalty": 1.1})


if __name__ == "__main__":
    run_checks(
        {
            "schema": lambda: Meeting.model_json_schema(),
            "chat": hello,
            "stream": hello_stream,
            "parse": parse,
            "beta_parse": beta_parse,
            "strict_tool": strict_tool,
            "non_strict_tool": non_strict_tool,
            "allowed_tools": allowed_tools,
            "sdk_fields": sdk_fields,
            "stream_include_obfuscation": lambda: hello_stream(include_obfuscation=False),
            "sampling_extensions": sampling_extensions,
        }
    )
