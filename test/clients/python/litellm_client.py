"""LiteLLM, unmodified, against Hearth as an `openai/` model with api_base: completion, streaming, a pydantic
response_format with bounds and a forced tool call. LITELLM_LOCAL_MODEL_COST_MAP=True (set by the test) keeps it from
fetching its cost map."""

import json
import os

import litellm
from hearth_checks import API_KEY, BASE_URL, MODEL, run_checks, type_name
from pydantic import BaseModel, Field

if os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP") != "True":
    raise SystemExit("LITELLM_LOCAL_MODEL_COST_MAP=True is required: LiteLLM would fetch its cost map")

TARGET = {"model": f"openai/{MODEL}", "api_base": BASE_URL, "api_key": API_KEY, "temperature": 0, "num_retries": 0}
HELLO = [{"role": "user", "content": "Say hello."}]


class Rating(BaseModel):
    product: str = Field(max_length=30)
    stars: int = Field(ge=1, le=5)


def completion() -> dict:
    response = litellm.completion(messages=HELLO, max_tokens=20, **TARGET)
    choice = response.choices[0]
    return {"content": choice.message.content, "finish_reason": choice.finish_reason}


def stream() -> dict:
    chunks = list(litellm.completion(messages=HELLO, max_tokens=20, stream=True, **TARGET))
    text = "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)
    return {"chunks": len(chunks), "text": text}


def response_format() -> dict:
    response = litellm.completion(
        messages=[{"role": "user", "content": "Rate the Acme kettle: product and stars from 1 to 5."}],
        response_format=Rating,
        max_tokens=60,
        **TARGET,
    )
    rating = Rating.model_validate_json(response.choices[0].message.content)
    return {"stars": rating.stars, "stars_type": type_name(rating.stars)}


def tool_call() -> dict:
    tool = {
        "type": "function",
        "function": {
            "name": "get_forecast",
            "description": "Weather forecast",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1, "maximum": 7}},
                "required": ["city", "days"],
            },
        },
    }
    response = litellm.completion(
        messages=[{"role": "user", "content": "What will the weather be in Paris for the next 3 days?"}],
        tools=[tool],
        tool_choice={"type": "function", "function": {"name": "get_forecast"}},
        max_tokens=60,
        **TARGET,
    )
    call = response.choices[0].message.tool_calls[0]
    args = json.loads(call.function.arguments)
    return {"name": call.function.name, "days": args["days"], "days_type": type_name(args["days"])}


if __name__ == "__main__":
    run_checks({"completion": completion, "stream": stream, "response_format": response_format, "tool_call": tool_call})
