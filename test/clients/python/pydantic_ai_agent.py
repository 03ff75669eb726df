"""pydantic-ai, unmodified, against Hearth through its OpenAI provider (chat completions): a plain text run, a
structured output_type with bounds (as an output tool, and as native json_schema output), and an agent whose first
step must call a function tool with an integer parameter before it gives its structured answer."""

from dataclasses import dataclass

from hearth_checks import API_KEY, BASE_URL, MODEL, run_checks, type_name
from pydantic import BaseModel, Field
from pydantic_ai import Agent, NativeOutput, RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.settings import ModelSettings

model = OpenAIChatModel(MODEL, provider=OpenAIProvider(base_url=BASE_URL, api_key=API_KEY))
SETTINGS = ModelSettings(temperature=0, seed=7, max_tokens=80)


class CityInfo(BaseModel):
    city: str = Field(max_length=30)
    population_millions: int = Field(ge=0, le=100)
    rating: int = Field(ge=1, le=5)


def city(output: CityInfo) -> dict:
    return {
        "population_millions": output.population_millions,
        "rating": output.rating,
        "rating_type": type_name(output.rating),
        "population_type": type_name(output.population_millions),
    }


PROMPT = "Tell me about Paris: city, population in millions and a rating from 1 to 5."


def text() -> dict:
    result = Agent(model, model_settings=SETTINGS).run_sync("Say hello.")
    return {"output": result.output}


def tool_output() -> dict:
    return city(Agent(model, output_type=CityInfo, model_settings=SETTINGS).run_sync(PROMPT).output)


def native_output() -> dict:
    return city(Agent(model, output_type=NativeOutput(CityInfo), model_settings=SETTINGS).run_sync(PROMPT).output)


def function_tool() -> dict:
    calls: list[dict] = []

    @dataclass
    class LookUpFirst(AbstractCapability[None]):
        """Forces the look-up on the step before it has run (a 135M model does not reliably choose to), then only
        the output tool."""

        def get_model_settings(self):
            return lambda ctx: ModelSettings(tool_choice=["get_population"] if not calls else "none")

    agent = Agent(model, output_type=CityInfo, model_settings=SETTINGS, capabilities=[LookUpFirst()])

    @agent.tool
    def get_population(ctx: RunContext[None], city: str, year: int) -> int:
        """Population of a city in a given year, in millions."""
        calls.append({"city": city, "year": year, "year_type": type_name(year)})
        return 2

    result = agent.run_sync(PROMPT)
    return {"calls": calls, "requests": result.usage.requests, **city(result.output)}


if __name__ == "__main__":
    run_checks(
        {"text": text, "tool_output": tool_output, "native_output": native_output, "function_tool": function_tool}
    )
