"""The OpenAI Agents SDK, unmodified, against Hearth with its default model (the Responses API): an agent whose first
turn must call a function tool, then answers in text. Tracing is off (it would export to OpenAI's servers); the
client is the SDK's default one, pointed at Hearth."""

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
set_default_openai_client(AsyncOpenAI(base_url=BASE_URL, api_key=API_KEY, max_retries=0), use_for_tracing=False)
# The SDK's default, said out loud: the test checks it is what was used.
set_default_openai_api("responses")


def tool_run() -> dict:
    calls: list[dict] = []

    agent = Agent(
        name="Weather",
        instructions="You answer questions about the weather. Use the get_weather tool.",
        model=MODEL,
        # A 135M model does not reliably choose a tool on its own: the first turn must call it.
        model_settings=ModelSettings(tool_choice="get_weather", temperature=0, max_tokens=60),
        # The tool switches tool_choice itself (below); the SDK's reset would make it "auto" instead.
        reset_tool_choice=False,
    )

    @function_tool
    def get_weather(city: str) -> str:
        """Current weather in a city."""
        calls.append({"city": city, "city_type": type_name(city)})
        # Once called, the next turn answers in text.
        agent.model_settings = agent.model_settings.resolve(ModelSettings(tool_choice="none"))
        return f"It is sunny and 22 degrees in {city}."

    agent.tools.append(get_weather)
    result = Runner.run_sync(agent, "What is the weather in Paris?", max_turns=4)
    items = [item.type for item in result.new_items]
    return {
        "model_class": type(OpenAIProvider().get_model(MODEL)).__name__,
        "calls": calls,
        "items": items,
        "model_responses": len(result.raw_responses),
        "response_ids": [response.response_id for response in result.raw_responses],
        "final_output": result.final_output,
        "input_tokens": result.context_wrapper.usage.input_tokens,
        "output_tokens": result.context_wrapper.usage.output_tokens,
    }


if __name__ == "__main__":
    run_checks({"tool_run": tool_run})
