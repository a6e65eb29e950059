"""A chat model that streams a fixed answer: no LLM, no network.

ag_ui_langgraph turns a chat model's streamed chunks into TEXT_MESSAGE_* and
TOOL_CALL_* events, and emits its `PredictState` custom event only while a
model streams a tool call named in the node's `predict_state` metadata
(ag_ui_langgraph/agent.py, `_handle_single_event`). Plain nodes cannot make
those events, so the predictive-state graph streams through this model.
"""

from typing import Any, AsyncIterator, Iterator, List, Optional

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult


class ScriptedChatModel(BaseChatModel):
    """Streams `text` word by word, or one tool call whose JSON arguments
    arrive in `pieces` chunks, then an empty chunk that closes the stream."""

    message_id: str
    text: str = ""
    tool_name: Optional[str] = None
    tool_call_id: Optional[str] = None
    tool_args: str = ""
    pieces: int = 4

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _chunks(self) -> List[AIMessageChunk]:
        if self.tool_name is None:
            words = self.text.split(" ")
            parts = [w if i == 0 else " " + w for i, w in enumerate(words)]
            return [AIMessageChunk(content=p, id=self.message_id) for p in parts]
        size = max(1, -(-len(self.tool_args) // self.pieces))
        args = [self.tool_args[i:i + size] for i in range(0, len(self.tool_args), size)]
        first = {"name": self.tool_name, "args": "", "id": self.tool_call_id, "index": 0}
        chunks = [AIMessageChunk(content="", id=self.message_id, tool_call_chunks=[first])]
        for piece in args:
            chunks.append(AIMessageChunk(
                content="", id=self.message_id,
                tool_call_chunks=[{"name": None, "args": piece, "id": None, "index": 0}],
            ))
        # An empty chunk with no tool_call_chunks is what ends a streamed
        # tool call in ag_ui_langgraph (`is_tool_call_end_event`).
        chunks.append(AIMessageChunk(content="", id=self.message_id))
        return chunks

    def _stream(self, messages: List[BaseMessage], stop: Optional[List[str]] = None,
                run_manager: Optional[CallbackManagerForLLMRun] = None, **kwargs: Any) -> Iterator[ChatGenerationChunk]:
        # BaseChatModel.stream reports each chunk to the callbacks itself.
        for chunk in self._chunks():
            yield ChatGenerationChunk(message=chunk)

    async def _astream(self, messages: List[BaseMessage], stop: Optional[List[str]] = None,
                       run_manager: Optional[AsyncCallbackManagerForLLMRun] = None,
                       **kwargs: Any) -> AsyncIterator[ChatGenerationChunk]:
        for chunk in self._chunks():
            yield ChatGenerationChunk(message=chunk)

    def _generate(self, messages: List[BaseMessage], stop: Optional[List[str]] = None,
                  run_manager: Optional[CallbackManagerForLLMRun] = None, **kwargs: Any) -> ChatResult:
        merged: Optional[AIMessageChunk] = None
        for chunk in self._chunks():
            merged = chunk if merged is None else merged + chunk
        message = AIMessage(content=merged.content if merged else "", id=self.message_id,
                            tool_calls=merged.tool_calls if merged else [])
        return ChatResult(generations=[ChatGeneration(message=message)])
