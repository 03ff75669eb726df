"""LangChain's ChatOpenAI (langchain-openai), unmodified, against Hearth: invoke, stream, with_structured_output of a
pydantic model with bounds (json_schema and function calling), bind_tools with a forced call, and reasoning_effort
as apps set it."""

from hearth_checks import API_KEY, BASE_URL, MODEL, run_checks, type_name
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from pydantic import BaseModel, Field


def chat(max_tokens: int, **kwargs) -> ChatOpenAI:
    return ChatOpenAI(
        model=MODEL, base_url=BASE_URL, api_key=API_KEY, temperature=0, max_tokens=max_tokens, max_retries=0, **kwargs
    )


class Movie(BaseModel):
    title: str = Field(max_length=40)
    year: int
    rating: int = Field(ge=1, le=10)


class Forecast(BaseModel):
    city: str = Field(max_length=30)
    days: int = Field(ge=1, le=7)


@tool(args_schema=Forecast)
def get_forecast(city: str, days: int) -> str:
    """Weather forecast for a city over a number of days."""
    return f"sunny in {city} for {days} days"


PROMPT = "Describe the film Casablanca: title, year and a rating from 1 to 10."


def invoke() -> dict:
    message = chat(20).invoke("Say hello.")
    return {"content": message.content, "output_tokens": (message.usage_metadata or {}).get("output_tokens")}


def stream() -> dict:
    chunks = list(chat(20).stream("Say hello."))
    return {"chunks": len(chunks), "text": "".join(str(chunk.content) for chunk in chunks)}


def movie(method: str | None) -> dict:
    options = {} if method is None else {"method": method}
    result = chat(80).with_structured_output(Movie, **options).invoke(PROMPT)
    if not isinstance(result, Movie):
        raise TypeError(f"with_structured_output returned {type_name(result)}")
    return {"rating": result.rating, "rating_type": type_name(result.rating), "year_type": type_name(result.year)}


def tool_call() -> dict:
    message = chat(60).bind_tools([get_forecast], tool_choice="get_forecast").invoke(
        "What will the weather be in Paris for the next 3 days?"
    )
    call = message.tool_calls[0]
    result = get_forecast.invoke(call)
    return {
        "name": call["name"],
        "days": call["args"].get("days"),
        "days_type": type_name(call["args"].get("days")),
        "tool_result": result.content,
    }


def reasoning_effort() -> dict:
    message = chat(20, reasoning_effort="low").invoke("Say hello.")
    return {"content": message.content}


if __name__ == "__main__":
    run_checks(
        {
            "invoke": invoke,
            "stream": stream,
            "structured_output": lambda: movie(None),
            "structured_output_function_calling": lambda: movie("function_calling"),
            "tool_call": tool_call,
            "reasoning_effort": reasoning_effort,
        }
    )
