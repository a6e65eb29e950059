"""Each graph of graphs.py behind ag_ui_langgraph's own FastAPI endpoint, one
path per graph, served by uvicorn: LangGraph exactly as an app serves it.

    python server.py PORT

`/<graph>` uses the integration's defaults, except `/table`, served with
`emit_raw_events=False` to keep its fixture small. `/recipe-no-raw` is the recipe
graph with `emit_raw_events=False`, the option that drops the RAW events and
the `rawEvent` copies (ag_ui_langgraph/agent.py, `LangGraphAgent.__init__`).
"""

import logging
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import uvicorn  # noqa: E402
from ag_ui_langgraph import LangGraphAgent, add_langgraph_fastapi_endpoint  # noqa: E402
from fastapi import FastAPI  # noqa: E402

from graphs import build  # noqa: E402


def app() -> FastAPI:
    api = FastAPI()
    graphs = build()
    for name, graph in graphs.items():
        # The 1 MB graph alone drops the RAW events: with them each run's
        # answer is about 22 MB, the state repeated in every RAW copy.
        agent = LangGraphAgent(name=name, graph=graph, emit_raw_events=name != "table")
        add_langgraph_fastapi_endpoint(api, agent, f"/{name}")
    add_langgraph_fastapi_endpoint(
        api, LangGraphAgent(name="recipe-no-raw", graph=build()["recipe"], emit_raw_events=False), "/recipe-no-raw")
    return api


if __name__ == "__main__":
    # Logs go to stderr; the recorder reads nothing from stdout.
    uvicorn.run(app(), host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
