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
from typing import Any

BASE_URL = os.environ["HEARTH_BASE_URL"]
API_KEY = os.environ["HEARTH_API_KEY"]
MODEL = os.environ["HEARTH_MODEL"]


def type_name(value: Any) -> str:
    """The Python type of a parsed value, for the test to assert on (int, not float; datetime, not str)."""
    return type(value).__name__


def run_checks(checks: dict[str, Callable[[], Any]]) -> None:
    results: dict[str, Any] = {}
    for name, check in checks.items():
        try:
            results[name] = {"ok": True, "value": check()}
        except Exception as error:  # noqa: BLE001 - every failure is reported, with the library's message
            traceback.print_exc(file=sys.stderr)
            results[name] = {"ok": False, "error": f"{type(error).__name__}: {error}"}
    print(json.dumps(results, default=str))
