"""Eleven LangGraph graphs with no LLM: plain nodes that write state.

Each graph's state has several members; none of them is `ui`, the member the
client keeps for itself and LangGraph knows nothing about. Every graph reads
which turn it is from the count of user messages, so a thread's second run
changes what the first one wrote. Ids are fixed so a re-recording differs only
where LangGraph itself is not deterministic.
"""

import asyncio
import json
import operator
from typing import Annotated, Any, Callable, Dict, List

from typing_extensions import TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import MemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import interrupt

from scripted_model import ScriptedChatModel

Messages = Annotated[List[AnyMessage], add_messages]


def turn(state: Dict[str, Any]) -> int:
    """1 on a thread's first run, 2 on its second: the user messages so far."""
    return sum(1 for m in state.get("messages", []) if isinstance(m, HumanMessage))


def reply(graph: str, text: Callable[[int], str]) -> Callable[[Dict[str, Any]], Dict[str, Any]]:
    """The last node of most graphs: one assistant message, with a fixed id."""
    def node(state: Dict[str, Any]) -> Dict[str, Any]:
        t = turn(state)
        return {"messages": [AIMessage(content=text(t), id=f"{graph}-ai-{t}")]}
    return node


def chain(state_type: type, nodes: List[tuple]) -> Any:
    """START -> nodes in order -> END, with a checkpointer so a thread's runs share state."""
    g = StateGraph(state_type)
    for name, fn in nodes:
        g.add_node(name, fn)
    names = [n for n, _ in nodes]
    for a, b in zip([START, *names], [*names, END]):
        g.add_edge(a, b)
    return g.compile(checkpointer=MemorySaver())


# (a) The shared-state recipe, as the AG-UI dojo's shared_state agent keeps it.
class RecipeState(TypedDict, total=False):
    messages: Messages
    recipe: Dict[str, Any]
    status: str


def recipe_draft(state: RecipeState) -> RecipeState:
    if turn(state) > 1:
        return {"status": "revising"}
    return {"status": "drafting", "recipe": {
        "title": "Pasta al pomodoro", "skill_level": "Beginner", "cooking_time": "30 min",
        "special_preferences": ["Budget-Friendly"], "ingredients": [], "instructions": []}}


def recipe_ingredients(state: RecipeState) -> RecipeState:
    recipe = dict(state["recipe"])
    if turn(state) == 1:
        recipe["ingredients"] = [
            {"icon": "🍝", "name": "Spaghetti", "amount": "400 g"},
            {"icon": "🍅", "name": "Tomatoes", "amount": "800 g"},
            {"icon": "🧄", "name": "Garlic", "amount": "2 cloves"}]
    else:
        recipe["ingredients"] = [*recipe["ingredients"][:2], {"icon": "🌿", "name": "Basil", "amount": "1 bunch"}]
        recipe["special_preferences"] = ["Budget-Friendly", "Vegetarian"]
    return {"recipe": recipe}


def recipe_instructions(state: RecipeState) -> RecipeState:
    recipe = dict(state["recipe"])
    recipe["instructions"] = ["Boil the pasta.", "Simmer the tomatoes with garlic.", "Toss together."]
    if turn(state) > 1:
        recipe["instructions"][1] = "Simmer the tomatoes, then tear in the basil."
        recipe["cooking_time"] = "15 min"
    return {"recipe": recipe, "status": "done"}


# (b) Predictive state: the model streams a write_document tool call whose
# `document` argument the client may show before the node ends (the dojo's
# predictive_state_updates agent, with ScriptedChatModel for the LLM).
class DocumentState(TypedDict, total=False):
    messages: Messages
    document: str
    revision: int


async def document_write(state: DocumentState, config: RunnableConfig) -> DocumentState:
    t = turn(state)
    text = "# Trip plan\n\n- Day 1: Lisbon\n- Day 2: Sintra" if t == 1 else \
        "# Trip plan\n\n- Day 1: Lisbon\n- Day 2: Sintra\n- Day 3: Cascais"
    call_id = f"predictive-call-{t}"
    model = ScriptedChatModel(message_id=f"predictive-tool-ai-{t}", tool_name="write_document",
                              tool_call_id=call_id, tool_args=json.dumps({"document": text}))
    config = {**config, "metadata": {**config.get("metadata", {}), "predict_state": [
        {"state_key": "document", "tool": "write_document", "tool_argument": "document"}]}}
    response = None
    async for chunk in model.astream(state["messages"], config):
        response = chunk if response is None else response + chunk
    ai = AIMessage(content="", id=f"predictive-tool-ai-{t}", tool_calls=response.tool_calls)
    return {"messages": [ai, ToolMessage(content="Document written.", tool_call_id=call_id,
                                         id=f"predictive-tool-result-{t}")],
            "document": text, "revision": t}


async def document_confirm(state: DocumentState, config: RunnableConfig) -> DocumentState:
    t = turn(state)
    model = ScriptedChatModel(message_id=f"predictive-ai-{t}", text=f"I wrote revision {t} of the plan.")
    response = None
    async for chunk in model.astream(state["messages"], config):
        response = chunk if response is None else response + chunk
    return {"messages": [AIMessage(content=response.content, id=f"predictive-ai-{t}")]}


# (c) A nested document whose later nodes remove keys and shrink lists.
class NestedState(TypedDict, total=False):
    messages: Messages
    doc: Dict[str, Any]
    outline: List[str]


def nested_build(state: NestedState) -> NestedState:
    if turn(state) > 1:
        return {}
    return {"outline": ["intro", "method", "results", "notes"], "doc": {
        "title": "Survey", "meta": {"author": "ana", "draft": True, "reviewers": ["bo", "cy", "di"]},
        "sections": {"intro": {"text": "Why.", "comments": [{"by": "bo", "text": "ok"}]},
                     "method": {"text": "How.", "figures": [1, 2, 3]},
                     "notes": {"text": "Scratch.", "todo": ["cite", "trim"]}}}}


def nested_prune(state: NestedState) -> NestedState:
    doc = {**state["doc"], "sections": dict(state["doc"]["sections"])}
    if turn(state) == 1:
        del doc["sections"]["notes"]
        doc["meta"] = {k: v for k, v in doc["meta"].items() if k != "draft"}
        doc["sections"]["method"] = {**doc["sections"]["method"], "figures": [1]}
        return {"doc": doc, "outline": state["outline"][:3]}
    doc["meta"] = {**doc["meta"], "reviewers": doc["meta"]["reviewers"][:1]}
    del doc["sections"]["intro"]["comments"]
    return {"doc": doc, "outline": state["outline"][1:]}


def nested_finish(state: NestedState) -> NestedState:
    doc = dict(state["doc"])
    if turn(state) > 1:
        doc.pop("meta")
    return {"doc": {**doc, "sections": {**doc["sections"], "results": {"text": "What."}}}}


# (d) Keys that JSON Pointer must escape, that are not ASCII, or that a
# JavaScript object treats specially.
OddKeysState = TypedDict("OddKeysState", {
    "messages": Messages,
    "raster-ops/dataset": Dict[str, Any],
    "a~b": Dict[str, Any],
    "größe·サイズ": Dict[str, Any],
    "__proto__": Dict[str, Any],
}, total=False)


def odd_write(state: Dict[str, Any]) -> Dict[str, Any]:
    t = turn(state)
    return {
        "raster-ops/dataset": {"tiles/0": {"~": t}, "bands": ["r", "g", "b"][: 4 - t]},
        "a~b": {"~1": "tilde one", "/": "slash", "": f"empty key, turn {t}"},
        "größe·サイズ": {"😀": t, "é": "e-acute", "ｆｕｌｌ": "width"},
        "__proto__": {"polluted": t == 1, "constructor": {"prototype": {"x": t}}},
    }


def odd_remove(state: Dict[str, Any]) -> Dict[str, Any]:
    a = {k: v for k, v in state["a~b"].items() if k != "~1"}
    return {"a~b": a}


# (e) Integers past 2^53, as 64-bit ids and nanosecond clocks come.
class BigIntState(TypedDict, total=False):
    messages: Messages
    ids: Dict[str, int]
    counters: List[int]


def bigint_write(state: BigIntState) -> BigIntState:
    if turn(state) > 1:
        # The second run leaves `ids` alone: what LangGraph then holds is
        # whatever the client sent back in RunAgentInput.state.
        return {"counters": [*state.get("counters", []), 2 ** 53 + 3]}
    # No int64 bounds here: the client sends 2**63 - 1 back as the double
    # 2**63, which LangGraph's checkpointer then refuses ("Integer exceeds
    # 64-bit range") and the run breaks off.
    return {"ids": {"next_after_max_safe": 2 ** 53 + 1, "snowflake": 1541815603606036481,
                    "nanos": 1754006400123456789, "safe": 2 ** 53 - 1},
            "counters": [2 ** 53, 2 ** 53 + 2]}


# (f) An interrupt: the run pauses at `approve` until the client resumes it.
class ApprovalState(TypedDict, total=False):
    messages: Messages
    plan: List[str]
    approved: Any
    result: str


def approval_plan(state: ApprovalState) -> ApprovalState:
    return {"plan": ["back up the database", "run the migration", "verify row counts"]}


def approval_ask(state: ApprovalState) -> ApprovalState:
    answer = interrupt({"question": "Run this plan?", "plan": state["plan"]})
    return {"approved": answer}


def approval_execute(state: ApprovalState) -> ApprovalState:
    return {"result": f"ran {len(state['plan'])} steps", "plan": [],
            "messages": [AIMessage(content="The plan ran.", id=f"interrupt-ai-{turn(state)}")]}


# (g) A node writes state; the next node raises.
class FailingState(TypedDict, total=False):
    messages: Messages
    progress: Dict[str, Any]
    items: List[str]


def failing_collect(state: FailingState) -> FailingState:
    return {"progress": {"collected": 3, "turn": turn(state)}, "items": ["a", "b", "c"]}


def failing_validate(state: FailingState) -> FailingState:
    raise RuntimeError(f"validation failed on turn {turn(state)}: item 'c' is not allowed")


# (h) About 1 MB of state: a table whose rows a few nodes change.
class TableState(TypedDict, total=False):
    messages: Messages
    table: List[Dict[str, Any]]
    edits: List[str]


TABLE_ROWS = 4000


def table_rows() -> List[Dict[str, Any]]:
    return [{"id": i, "sku": f"SKU-{i:06d}", "name": f"Item {i} " + "x" * 140, "qty": i % 17,
             "price": round(1 + (i % 97) * 0.25, 2), "tags": ["bulk", f"bin-{i % 40}"]}
            for i in range(TABLE_ROWS)]


def table_edit(rows: List[int], field: str, label: str) -> Callable[[TableState], TableState]:
    def node(state: TableState) -> TableState:
        table = list(state.get("table") or table_rows())
        t = turn(state)
        for r in rows:
            row = dict(table[r + 7 * (t - 1)])
            row[field] = row[field] + 1 if field == "qty" else round(row[field] * 1.1, 2)
            table[r + 7 * (t - 1)] = row
        return {"table": table, "edits": [*state.get("edits", []), f"{label} turn {t}"],
                "messages": [AIMessage(content=f"{label} done.", id=f"table-ai-{label}-{t}")]}
    return node


def table_graph() -> Any:
    """Run 1 loads the table and reprices three rows; run 2 reprices three and
    restocks two. Every node's exit sends the whole ~1 MB state, so the nodes
    are few, and routing is by an edge out of `reprice`: routing out of START
    would add a `__start__` step, and with it one more whole snapshot."""
    g = StateGraph(TableState)
    g.add_node("reprice", table_edit([3, 1500, 3990], "price", "reprice"))
    g.add_node("restock", table_edit([10, 2000], "qty", "restock"))
    g.add_edge(START, "reprice")
    g.add_conditional_edges("reprice", lambda s: "restock" if turn(s) > 1 else END, ["restock", END])
    g.add_edge("restock", END)
    return g.compile(checkpointer=MemorySaver())


# (i) A slow graph: each node waits before it writes.
class SlowState(TypedDict, total=False):
    messages: Messages
    steps: Annotated[List[str], operator.add]
    progress: float


def slow_step(name: str, ms: int, share: float) -> Callable[[SlowState], Any]:
    async def node(state: SlowState) -> SlowState:
        await asyncio.sleep(ms / 1000)
        return {"steps": [f"{name}@{turn(state)}"], "progress": share}
    return node


# (j) A subgraph: the parent's `research` node is a compiled graph over the same keys.
class ResearchState(TypedDict, total=False):
    messages: Messages
    query: str
    findings: List[str]
    report: Dict[str, Any]


def research_subgraph() -> Any:
    inner = StateGraph(ResearchState)
    inner.add_node("search", lambda s: {"findings": [*s.get("findings", []), f"source for {s['query']}"]})
    inner.add_node("read", lambda s: {"findings": [*s["findings"], f"notes on {s['query']}"]})
    inner.add_edge(START, "search")
    inner.add_edge("search", "read")
    inner.add_edge("read", END)
    return inner.compile()


def research_plan(state: ResearchState) -> ResearchState:
    return {"query": ["tide tables", "moon phases"][turn(state) - 1], "report": {"status": "researching"}}


def research_report(state: ResearchState) -> ResearchState:
    return {"report": {"status": "done", "count": len(state["findings"]), "last": state["findings"][-1]}}


# (k) A todo list grown over nodes: items added, one done, one dropped.
class TodoState(TypedDict, total=False):
    messages: Messages
    todos: List[Dict[str, Any]]
    summary: Dict[str, int]


def todo_add(state: TodoState) -> TodoState:
    t = turn(state)
    new = [{"id": f"t{t}-{i}", "title": title, "done": False}
           for i, title in enumerate([["buy milk", "call bank", "book dentist"], ["file taxes", "water plants"]][t - 1])]
    return {"todos": [*state.get("todos", []), *new]}


def todo_complete(state: TodoState) -> TodoState:
    todos = [dict(x) for x in state["todos"]]
    todos[turn(state) - 1]["done"] = True
    return {"todos": todos}


def todo_drop(state: TodoState) -> TodoState:
    todos = [x for x in state["todos"] if x["id"] != "t1-1"]
    return {"todos": todos, "summary": {"open": sum(not x["done"] for x in todos), "done": sum(x["done"] for x in todos)}}


def build() -> Dict[str, Any]:
    """Each graph by the name its endpoint and fixture carry."""
    return {
        "recipe": chain(RecipeState, [("draft", recipe_draft), ("ingredients", recipe_ingredients),
                                      ("instructions", recipe_instructions),
                                      ("reply", reply("recipe", lambda t: f"Recipe ready (turn {t})."))]),
        "predictive": chain(DocumentState, [("write", document_write), ("confirm", document_confirm)]),
        "nested": chain(NestedState, [("build", nested_build), ("prune", nested_prune), ("finish", nested_finish),
                                      ("reply", reply("nested", lambda t: "Pruned."))]),
        "odd-keys": chain(OddKeysState, [("write", odd_write), ("remove", odd_remove),
                                         ("reply", reply("odd-keys", lambda t: "Keys written."))]),
        "bigint": chain(BigIntState, [("write", bigint_write), ("reply", reply("bigint", lambda t: "Ids stored."))]),
        "interrupt": chain(ApprovalState, [("plan", approval_plan), ("ask", approval_ask), ("execute", approval_execute)]),
        "raise": chain(FailingState, [("collect", failing_collect), ("validate", failing_validate)]),
        "table": table_graph(),
        "slow": chain(SlowState, [("fetch", slow_step("fetch", 80, 0.33)), ("parse", slow_step("parse", 50, 0.66)),
                                  ("store", slow_step("store", 100, 1.0)),
                                  ("reply", reply("slow", lambda t: "Stored."))]),
        "subgraph": chain(ResearchState, [("plan", research_plan), ("research", research_subgraph()),
                                          ("report", research_report),
                                          ("reply", reply("subgraph", lambda t: "Report written."))]),
        "todo": chain(TodoState, [("add", todo_add), ("complete", todo_complete), ("drop", todo_drop),
                                  ("reply", reply("todo", lambda t: "Todos updated."))]),
    }
