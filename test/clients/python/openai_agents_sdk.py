"""The OpenAI Agents SDK, unmodified, against Hearth with its default model (the Responses API): an agent whose first
turn must call a function tool, then answers in text, run (Runner.run_sync) and streamed (Runner.run_streamed). Tracing is off (it would export to OpenAI's servers); the
client is the SDK's default one, pointed at Hearth."""

import asyncio

from agents import (
    Agent,
    ModelSettings,
    Runner,
    function_tool,
    set_default_openai_api,
    set_default_openai_client,
    set_tracing_disabled,
)
from agents.models.openai_provider import OpenAIProvider
from hearth_checks import API_KEY, BASE_URL, MODEL, run_checks, type_name
from openai import AsyncOpenAI

set_tracing_disabled(True)
# The SDK's default, said out loud: the test checks it is what was used.
set_default_openai_api("responses")


def use_hearth() -> None:
    """The SDK's default client pointed at Hearth: a new one for each run (an async client belongs to its loop)."""
    set_default_openai_client(AsyncOpenAI(base_url=BASE_URL, api_key=API_KEY, max_retries=0), use_for_tracing=False)


def weather_agent(calls: list[dict]) -> Agent:
    """An agent whose first turn must call its tool (a 135M model does not reliably choose to); once called, the
    tool itself switches tool_choice to "none", so the next turn answers in text."""
    agent = Agent(
        name="Weather",
        instructions="You answer questions about the weather. Use the get_weather tool.",
        model=MODEL,
        model_settings=ModelSettings(tool_choice="get_weather", temperature=0, max_tokens=60),
        # The tool switches tool_choice itself; the SDK's reset would make it "auto" instead.
        reset_tool_choice=False,
    )

    @function_tool
    def get_weather(city: str) -> str:
        """Current weather in a city."""
        calls.append({"city": city, "city_type": type_name(city)})
        agent.model_settings = agent.model_settings.resolve(ModelSettings(tool_choice="none"))
        return f"It is sunny and 22 degrees in {city}."

    agent.tools.append(get_weather)
    return agent


def run_summary(result, calls: list[dict]) -> dict:
    return {
        "model_class": type(OpenAIProvider().get_model(MODEL)).__name__,
        "calls": calls,
        "items": [item.type for item in result.new_items],
        "model_responses": len(result.raw_responses),
        "response_ids": [response.response_id for response in result.raw_responses],
        "final_output": result.final_output,
        "input_tokens": result.context_wrapper.usage.input_tokens,
        "output_tokens": result.context_wrapper.usage.output_tokens,
    }


def tool_run() -> dict:
    use_hearth()
    calls: list[dict] = []
    result = Runner.run_sync(weather_agent(calls), "What is the weather in Paris?", max_turns=4)
    return run_summary(result, calls)


def streamed_tool_run() -> dict:
    """The same run streamed (Runner.run_streamed: the SDK reads the Responses API's SSE events)."""

    async def run() -> dict:
        use_hearth()
        calls: list[dict] = []
        result = Runner.run_streamed(weather_agent(calls), "What is the weather in Paris?", max_turns=4)
        text_deltas = 0
        async for event in result.stream_events():
            if event.type == "raw_response_event" and event.data.type == "response.output_text.delta":
                text_deltas += 1
        return {**run_summary(result, calls), "text_deltas": text_deltas}

    return asyncio.run(run())


if __name__ == "__main__":
    run_checks({"tool_run": tool_run, "streamed_tool_run": streamed_tool_run})
