"""From projected AgentMessages to what a provider receives.

Two steps, as in Pi: :func:`convert_to_llm` turns pi's internal roles (bashExecution,
custom, branchSummary, compactionSummary) into user messages; :func:`normalize` then
cleans the transcript provider-agnostically (failed replies dropped, missing tool results
synthesized, system messages folded into one head) and emits OpenAI-format dicts that
litellm accepts for any provider.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from .entries import Message

# Our own wording for the wrappers around summaries (Pi's constants are not copied).
COMPACTION_SUMMARY_PREFIX = (
    "Earlier turns of this conversation were condensed to save space. "
    "Their summary follows:\n\n<summary>\n"
)
COMPACTION_SUMMARY_SUFFIX = "\n</summary>"
BRANCH_SUMMARY_PREFIX = (
    "Before returning here, the conversation explored another branch. "
    "What happened there:\n\n<summary>\n"
)
BRANCH_SUMMARY_SUFFIX = "\n</summary>"
MISSING_TOOL_RESULT = "No result was recorded for this tool call."


def as_text(value: Any) -> str:
    """A text field's value, or "" when a hostile file put something else there (a number,
    an object…): every reader treats such a field as empty instead of failing on it."""
    return value if isinstance(value, str) else ""


def content_text(content: Any, separator: str = "\n") -> str:
    """The text of a string or a list of content blocks (non-text blocks ignored)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return separator.join(
        b["text"] for b in content
        if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
    )


def bash_execution_text(message: Message) -> str:
    """A user-visible rendering of a `!command` the user ran."""
    output = message.get("output") or ""
    text = f"The user ran `{message.get('command', '')}`\n"
    text += f"```\n{output}\n```" if output else "(it printed nothing)"
    exit_code = message.get("exitCode")
    if message.get("cancelled"):
        text += "\n\n(the command was cancelled)"
    elif exit_code not in (None, 0):
        text += f"\n\nExit code: {exit_code}"
    if message.get("truncated") and message.get("fullOutputPath"):
        text += f"\n\n[Output truncated; the full output is in {message['fullOutputPath']}]"
    return text


def convert_to_llm(messages: Iterable[Message]) -> list[Message]:
    """Internal roles → user messages; user/assistant/toolResult/system pass through."""
    out: list[Message] = []
    for m in messages:
        role = m.get("role")
        stamp = m.get("timestamp")
        if role == "bashExecution":
            if m.get("excludeFromContext"):
                continue
            out.append(_user([{"type": "text", "text": bash_execution_text(m)}], stamp))
        elif role == "custom":
            content = m.get("content")
            if isinstance(content, str):
                content = [{"type": "text", "text": content}]
            out.append(_user(content if isinstance(content, list) else [], stamp))
        elif role == "branchSummary":
            text = BRANCH_SUMMARY_PREFIX + str(m.get("summary", "")) + BRANCH_SUMMARY_SUFFIX
            out.append(_user([{"type": "text", "text": text}], stamp))
        elif role == "compactionSummary":
            text = COMPACTION_SUMMARY_PREFIX + str(m.get("summary", "")) + COMPACTION_SUMMARY_SUFFIX
            out.append(_user([{"type": "text", "text": text}], stamp))
        elif role in ("system", "user", "assistant", "toolResult"):
            out.append(m)
    return out


def _user(content: list[Any], stamp: Any) -> Message:
    return {"role": "user", "content": content, "timestamp": stamp}


def current_system_message(messages: Sequence[Message]) -> Message | None:
    """Replay every system message into one: content appended, sections patched, tools resolved."""
    content: list[str] = []
    sections: dict[str, str] = {}
    tools: dict[str, Any] = {}
    timestamp = None
    seen = False
    for message in messages:
        if message.get("role") != "system":
            continue
        if not seen:
            timestamp = message.get("timestamp")
            seen = True
        text = content_text(message.get("content"))
        if text:
            content.append(text)
        patch = message.get("sections")
        for name, value in patch.items() if isinstance(patch, dict) else ():
            if value is None:
                sections.pop(name, None)
            else:
                sections[name] = value
        removed = message.get("toolsRemoved")
        for tool in removed if isinstance(removed, list) else ():
            if isinstance(tool, dict) and isinstance(tool.get("name"), str):
                tools.pop(tool["name"], None)
        added = message.get("toolsAdded")
        for tool in added if isinstance(added, list) else ():
            if isinstance(tool, dict) and isinstance(tool.get("name"), str):
                tools[tool["name"]] = tool
    if not seen and not tools:
        return None
    system: Message = {"role": "system", "content": "\n\n".join(content)}
    if sections:
        system["sections"] = sections
    if tools:
        system["toolsAdded"] = list(tools.values())
    system["timestamp"] = timestamp if timestamp is not None else 0
    return system


def system_prompt_text(message: Message) -> str:
    """A system message rendered as one prompt: its content, then its sections."""
    parts = [content_text(message.get("content"))]
    sections = message.get("sections")
    parts += [v for v in sections.values() if isinstance(v, str)] if isinstance(sections, dict) else []
    return "\n\n".join(p for p in parts if p)


def _image_part(block: dict[str, Any]) -> dict[str, Any]:
    url = f"data:{block.get('mimeType', 'image/png')};base64,{block.get('data', '')}"
    return {"type": "image_url", "image_url": {"url": url}}


def _openai_content(content: Any) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    parts: list[dict[str, Any]] = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            parts.append({"type": "text", "text": as_text(block.get("text"))})
        elif block.get("type") == "image":
            parts.append(_image_part(block))
    if all(p["type"] == "text" for p in parts):
        return "\n".join(p["text"] for p in parts)
    return parts


def normalize(
    messages: Sequence[Message],
    system_prompt: str | None = None,
    tools: Sequence[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """LLM-level messages → OpenAI-format request messages for litellm.

    - assistant replies that ended in ``error`` or ``aborted`` are dropped;
    - a tool call with no result before the next user/assistant turn gets a synthetic
      error result, so every provider accepts the transcript;
    - thinking blocks are not sent back (providers differ in how they replay them);
    - all system messages (and ``system_prompt``) fold into one leading system message;
    - tool-result images follow the batch's results as a user message (tool messages
      carry text only).
    """
    head_parts: list[str] = []
    if system_prompt:
        head_parts.append(system_prompt)
    system = current_system_message(messages)
    if system is not None:
        text = system_prompt_text(system)
        if text:
            head_parts.append(text)
    out: list[dict[str, Any]] = []
    if head_parts:
        out.append({"role": "system", "content": "\n\n".join(head_parts)})
    pending: list[str] = []
    answered: set[str] = set()
    images_after_results: list[dict[str, Any]] = []

    def close_pending() -> None:
        for call_id in pending:
            if call_id not in answered:
                out.append({"role": "tool", "tool_call_id": call_id, "content": MISSING_TOOL_RESULT})
        pending.clear()
        if images_after_results:
            out.append({"role": "user", "content": list(images_after_results)})
            images_after_results.clear()

    for m in messages:
        role = m.get("role")
        if role == "system":
            continue
        if role == "assistant":
            if m.get("stopReason") in ("error", "aborted"):
                continue
            close_pending()
            text_parts: list[str] = []
            calls: list[dict[str, Any]] = []
            content = m.get("content")
            for block in content if isinstance(content, list) else []:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "text":
                    text_parts.append(as_text(block.get("text")))
                elif block.get("type") == "toolCall" and isinstance(block.get("name"), str):
                    # A call without a string name cannot be replayed to any provider: it
                    # is left out (and so is its result, which then answers nothing).
                    arguments = block.get("arguments")
                    calls.append(
                        {
                            "id": str(block.get("id")),
                            "type": "function",
                            "function": {
                                "name": block["name"],
                                "arguments": json.dumps(
                                    arguments if isinstance(arguments, dict) else {},
                                    ensure_ascii=False,
                                ),
                            },
                        }
                    )
            message: dict[str, Any] = {"role": "assistant", "content": "\n".join(text_parts) or None}
            if calls:
                message["tool_calls"] = calls
                pending.extend(c["id"] for c in calls)
            elif message["content"] is None:
                message["content"] = ""
            out.append(message)
        elif role == "toolResult":
            call_id = str(m.get("toolCallId"))
            if call_id not in pending or call_id in answered:
                continue  # a result for a call that is not in context any more
            answered.add(call_id)
            content = m.get("content")
            text = content_text(content)
            if m.get("isError") and not text:
                text = "(tool error)"
            out.append({"role": "tool", "tool_call_id": call_id, "content": text})
            images = [b for b in content if isinstance(b, dict) and b.get("type") == "image"] \
                if isinstance(content, list) else []
            images_after_results.extend(_image_part(b) for b in images)
        elif role == "user":
            close_pending()
            out.append({"role": "user", "content": _openai_content(m.get("content"))})
    close_pending()
    return out


def to_request(
    agent_messages: Sequence[Message],
    system_prompt: str | None = None,
    tools: Sequence[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """convert_to_llm then normalize: the messages litellm gets for a projection."""
    return normalize(convert_to_llm(agent_messages), system_prompt, tools)
