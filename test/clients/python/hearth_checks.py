"""Shared by the client-library scripts: Hearth's endpoint from the environment, and the checks' JSON report.

Each script runs its checks one after another and prints one JSON object on its last stdout line:
{"<check>": {"ok": true, "value": ...} | {"ok": false, "error": "<exception type>: <message>"}}.
A failing check does not stop the others: the test tier reports each one with the library's own error.
"""

import json
import os
import sys
import traceback
from collections.abc import Callable
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

BASE_URL = os.environ["HEARTH_BASE_URL"]
API_KEY = os.environ["HEARTH_API_KEY"]
MODEL = os.environ["HEARTH_MODEL"]


def type_name(value: Any) -> str:
    """The Python type of a parsed value, for the test to assert on (int, not float; datetime, not str)."""
    return type(value).__name__


class Meeting(BaseModel):
    """The structured output both openai-python scripts parse: a bounded integer and a datetime."""

    title: str = Field(max_length=40)
    priority: int = Field(ge=1, le=10)
    starts_at: datetime


def meeting(parsed: Meeting | None) -> dict:
    """What the tests assert on a parsed Meeting: its value's bound and each field's Python type."""
    if parsed is None:
        raise ValueError("the parsed output is None")
    return {
        "priority": parsed.priority,
        "priority_type": type_name(parsed.priority),
        "starts_at_type": type_name(parsed.starts_at),
        "title_type": type_name(parsed.title),
    }


def run_checks(checks: dict[str, Callable[[], Any]]) -> None:
    results: dict[str, Any] = {}
    for name, check in checks.items():
        try:
            results[name] = {"ok": True, "value": check()}
        except Exception as error:  # noqa: BLE001 - every failure is reported, with the library's message
            traceback.print_exc(file=sys.stderr)
            results[name] = {"ok": False, "error": f"{type(error).__name__}: {error}"}
    print(json.dumps(results, default=str))
