"""instructor, unmodified, against Hearth: `from_openai` with a response_model with bounds, in its default tools
mode, in strict tools mode and in json_schema (response_format) mode."""

import instructor
from hearth_checks import API_KEY, BASE_URL, MODEL, run_checks, type_name
from openai import OpenAI
from pydantic import BaseModel, Field


class Rating(BaseModel):
    product: str = Field(max_length=30)
    stars: int = Field(ge=1, le=5)
    recommended: bool


def rating(mode: instructor.Mode) -> dict:
    client = instructor.from_openai(OpenAI(base_url=BASE_URL, api_key=API_KEY, max_retries=0), mode=mode)
    # max_retries=0: one request, so what the server answers is reported, not retried into another error.
    result = client.chat.completions.create(
        model=MODEL,
        response_model=Rating,
        messages=[{"role": "user", "content": "Rate the Acme kettle: product, stars from 1 to 5, recommended."}],
        temperature=0,
        max_tokens=60,
        max_retries=0,
    )
    return {
        "stars": result.stars,
        "stars_type": type_name(result.stars),
        "recommended_type": type_name(result.recommended),
    }


if __name__ == "__main__":
    run_checks(
        {
            "tools": lambda: rating(instructor.Mode.TOOLS),
            "tools_strict": lambda: rating(instructor.Mode.TOOLS_STRICT),
            "json_schema": lambda: rating(instructor.Mode.JSON_SCHEMA),
        }
    )
