"""Redaction of credentials in text that leaves the process.

:func:`redact` replaces, in a string,

* provider API keys by shape: OpenAI ``sk-…`` (``sk-proj-…``, ``sk-svcacct-…``), Anthropic
  ``sk-ant-…``, Google ``AIza…``, xAI ``xai-…``, Groq ``gsk_…``, Hugging Face ``hf_…``,
  OpenRouter ``sk-or-…``, GitHub ``ghp_…`` / ``github_pat_…``, AWS access key ids, Stripe
  ``sk_live_…`` / ``rk_live_…`` / ``sk_test_…``, Slack ``xoxb-…`` (``xox[abprs]-``), and
  JSON Web Tokens (three base64url segments starting ``eyJ``);
* the password of any URL with credentials (``postgres://user:PASSWORD@host``);
* ``Bearer <token>`` and the values of ``Authorization`` / ``Proxy-Authorization`` /
  ``x-api-key`` / ``api-key`` headers (``Name: value`` or ``"Name": "value"``);
* the values (8+ characters) of the variables currently in ``os.environ`` whose names
  :data:`SECRET_ENV_NAME` matches: names containing ``KEY``, ``TOKEN``, ``SECRET``,
  ``PASSWORD`` / ``PASSWD`` / ``PASS`` / ``PWD``, ``CREDENTIAL``, ``AUTH`` or ``PRIVATE``
  (``OPENAI_API_KEY_2``, ``PGPASSWORD``, ``MYSQL_PWD`` …). The bash tool scrubs its output
  with the same list.

with ``[REDACTED]`` markers (a key keeps its public prefix, an env value names its
variable: ``[REDACTED:OPENAI_API_KEY]``). :func:`redact_obj` does the same for every string
in a JSON-like value (dict keys included). Both are idempotent and never raise.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = [
    "REDACTED",
    "SECRET_ENV_NAME",
    "is_secret_env_name",
    "needs_redaction",
    "redact",
    "redact_obj",
    "secret_env_values",
]

REDACTED = "[REDACTED]"

# Key shapes: (pattern, prefix kept in the output). Each starts with a literal, which the
# regex engine scans for quickly; a match preceded by an identifier character is left alone.
_KEY_RULES = [
    (needles, re.compile(p), prefix)
    for needles, p, prefix in (
        (("sk-ant-",), r"sk-ant-[A-Za-z0-9_\-]{16,}", "sk-ant-"),
        (("sk-or-",), r"sk-or-[A-Za-z0-9_\-]{16,}", "sk-or-"),
        (("sk-",), r"sk-[A-Za-z0-9_\-]{16,}", "sk-"),
        (("AIza",), r"AIza[0-9A-Za-z_\-]{30,}", "AIza"),
        (("xai-",), r"xai-[A-Za-z0-9_\-]{16,}", "xai-"),
        (("gsk_",), r"gsk_[A-Za-z0-9]{16,}", "gsk_"),
        (("hf_",), r"hf_[A-Za-z0-9]{20,}", "hf_"),
        (("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), r"gh[pousr]_[A-Za-z0-9]{20,}", "gh_"),
        (("github_pat_",), r"github_pat_[A-Za-z0-9_]{20,}", "github_pat_"),
        (("AKIA",), r"AKIA[0-9A-Z]{16}(?![0-9A-Za-z])", "AKIA"),
        (("ASIA",), r"ASIA[0-9A-Z]{16}(?![0-9A-Za-z])", "ASIA"),
        # Stripe secret and restricted keys (publishable pk_ keys are public).
        (("sk_live_", "rk_live_", "sk_test_", "rk_test_"), r"([sr]k_(?:live|test)_)[A-Za-z0-9]{10,}", None),
        # Slack bot / user / app-level / refresh / legacy tokens.
        (("xoxa-", "xoxb-", "xoxp-", "xoxr-", "xoxs-"), r"(xox[abprs]-)[A-Za-z0-9\-]{10,}", None),
        # A JWT: header.payload.signature, base64url; the header is JSON, so it starts "eyJ".
        # The look-behind rejects a start inside a longer run at once: without it, every
        # "eyJ" of a long base64 run would rescan the run for the dots (quadratic).
        (("eyJ",), r"(?<![A-Za-z0-9_\-])eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}", "eyJ"),
    )
]
# userinfo of a URL: scheme://user:password@host — the password goes (up to the last "@"
# before the path). Starts with a literal, so the scan is quick.
_URL_PASSWORD = re.compile(r"(://[^\s/?#@:\"'<>]*:)(?!\[REDACTED)[^\s/?#\"'<>]+(@)")
_IDENT = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")

# Case-insensitive rules, found by a plain search for their (lower-case) needle and then
# matched at that position (a case-insensitive scan of a 100 MB text would take seconds).
# "Bearer <token>": a token of 8+ characters holding a digit, or of 24+ characters (so that
# prose such as "Bearer authentication" is left alone).
_BEARER = re.compile(
    r"(?i)(bearer\s+)((?=[A-Za-z0-9._~+/\-]*[0-9])[A-Za-z0-9._~+/\-]{8,}=*|[A-Za-z0-9._~+/\-]{24,}=*)"
)
# Header values: `Authorization: Basic abc`, `"authorization": "…"`, `x-api-key=…`.
_HEADER_TAIL = r"""(["']?\s*[:=]\s*["']?)(?![\s"']*\[REDACTED)([^"'\r\n]+)"""
_CI_RULES = [
    ("bearer", _BEARER),
    ("authorization", re.compile(r"(?i)(authorization)" + _HEADER_TAIL)),
    ("api-key", re.compile(r"(?i)(api-key)" + _HEADER_TAIL)),
]

#: Names of environment variables whose values are credentials. One list for the redactor
#: and the bash tool. Anywhere in the name: API_KEY / APIKEY, ACCESS_KEY, TOKEN, SECRET,
#: PASSWORD, PASSWD, PASSPHRASE, CREDENTIAL, PRIVATE (so ``OPENAI_API_KEY_2``,
#: ``PGPASSWORD``); as a word (between start/end, "_" or digits): KEY, PASS, AUTH, and PWD
#: after "_" (``MYSQL_PWD``; ``PWD`` and ``OLDPWD`` are the shell's directories). Names of
#: paths and sockets (``*_DIR``, ``*_PATH``, ``*_FILE``, ``*_SOCK`` …) hold no secret.
SECRET_ENV_NAME = re.compile(
    r"""(?ix)
    ^(?!.*_(?:DIR|PATH|FILE|SOCK|SOCKET|HOME|CACHE|CACHE_DIR)$)
    .*(?:
        API_?KEY|ACCESS_?KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|CREDENTIAL|PRIVATE
      | (?:^|[_0-9])(?:KEYS?|PASS|O?AUTH)(?:$|[_0-9])
      | KEYS?(?:$|[_0-9])
      | _PWD(?:$|[_0-9])
    )""",
)
_SECRET_NAME = SECRET_ENV_NAME
_MIN_SECRET_LEN = 8
# Values that are configuration, not secrets, even under a secret-looking name.
_NOT_SECRET = {"true", "false", "none", "null", "undefined", "disabled", "enabled"}


# Literals (lower-cased) one of which every match contains: a text holding none of them is
# clean. Checked on the lower-cased text: case variants only cost a closer look.
_NEEDLES = ("sk-", "aiza", "xai-", "gsk_", "hf_", "akia", "asia", "bearer", "authorization",
            "api-key", "github_pat_", "k_live_", "k_test_", "xox", "eyj", "://")
_GH_NEEDLES = ("ghp_", "gho_", "ghu_", "ghs_", "ghr_")  # looked for only when "gh" occurs
_NEEDLES_B = tuple(n.encode() for n in _NEEDLES)
_GH_NEEDLES_B = tuple(n.encode() for n in _GH_NEEDLES)


def _may_match(text: str | bytes) -> bool:
    lowered = text.lower()
    if isinstance(lowered, bytes):
        needles, gh, gh_needles = _NEEDLES_B, b"gh", _GH_NEEDLES_B
    else:
        needles, gh, gh_needles = _NEEDLES, "gh", _GH_NEEDLES
    for needle in needles:
        if needle in lowered:  # type: ignore[operator]
            return True
    return gh in lowered and any(n in lowered for n in gh_needles)  # type: ignore[operator]


# Characters JSON escapes: an env value holding one would not appear verbatim in a JSON line.
_JSON_ESCAPED = re.compile(r'["\\\x00-\x1f\ud800-\udfff]')


def needs_redaction(json_text: str | bytes, env: Mapping[str, str] | None = None) -> bool:
    """Whether a JSON document (e.g. an encoded session line) may hold something
    :func:`redact_obj` would change. False is definitive; True means "redact to be sure".
    One fast scan instead of a walk over every string of the value."""
    if _may_match(json_text):
        return True
    for value, _ in _env_secrets(env):
        if _JSON_ESCAPED.search(value):
            return True  # escaped in the JSON text: cannot be searched for verbatim
        needle: str | bytes = value.encode("utf-8", "surrogatepass") if isinstance(json_text, bytes) else value
        if needle in json_text:  # type: ignore[operator]
            return True
    return False


_QUICK_MAX = 4096

_secret_names: dict[str | bytes, bool] = {}
_env_cache: tuple[tuple[tuple[str, str], ...], list[tuple[str, str]]] = ((), [])


_env_raw_cache: list[Any] = [None, []]


def is_secret_env_name(name: str) -> bool:
    """Whether an environment variable of this name holds a credential (:data:`SECRET_ENV_NAME`)."""
    return _is_secret_name(name)


def _is_secret_name(name: str | bytes) -> bool:
    known = _secret_names.get(name)
    if known is None:
        text = name.decode("utf-8", "replace") if isinstance(name, bytes) else name
        known = _secret_names[name] = bool(_SECRET_NAME.search(text))
    return known


def secret_env_values(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``{value: NAME}`` for environment variables whose names look like credentials."""
    env = os.environ if env is None else env
    out: dict[str, str] = {}
    for name, value in env.items():
        if (
            isinstance(value, str)
            and len(value) >= _MIN_SECRET_LEN
            and _is_secret_name(name)
            and value.strip().lower() not in _NOT_SECRET
        ):
            out[value] = name
    return out


def _env_secrets(env: Mapping[str, str] | None) -> list[tuple[str, str]]:
    """(value, name) pairs, longest value first (so a value containing another wins)."""
    global _env_cache
    raw = getattr(os.environ, "_data", None) if env is None else None
    if isinstance(raw, dict):
        # Fast path over os.environ's raw storage (decoding every variable on each call
        # would dominate the cost of redacting a small entry): unchanged items compare
        # equal by identity, so an unchanged environment costs one tuple comparison.
        raw_key = tuple(raw.items())
        if raw_key == _env_raw_cache[0]:
            return _env_raw_cache[1]
        pairs = _env_secrets(dict(os.environ))
        _env_raw_cache[:] = [raw_key, pairs]
        return pairs
    values = secret_env_values(env)
    key = tuple(values.items())
    if key == _env_cache[0]:
        return _env_cache[1]
    pairs = sorted(values.items(), key=lambda kv: (-len(kv[0]), kv[0]))
    _env_cache = (key, pairs)
    return pairs


def redact(text: Any, env: Mapping[str, str] | None = None) -> Any:
    """``text`` with credentials replaced (non-strings are returned unchanged).

    ``env`` defaults to ``os.environ`` (read on every call, so a key set later is caught).
    """
    if not isinstance(text, str) or not text:
        return text
    return _clean(text, _env_secrets(env))


def _clean(text: str, secrets: list[tuple[str, str]]) -> str:
    """Redacted text; the very same object when nothing was found."""
    try:
        cleaned = _redact(text, secrets)
    except Exception:  # never let redaction itself break an error path
        return REDACTED
    return text if cleaned == text else cleaned


def _redact(text: str, secrets: list[tuple[str, str]]) -> str:
    for value, name in secrets:
        if value in text:
            text = text.replace(value, f"[REDACTED:{name}]")
    if len(text) <= _QUICK_MAX and not _may_match(text):
        return text
    for needles, pattern, prefix in _KEY_RULES:
        if any(needle in text for needle in needles):  # a plain search is much faster
            text = pattern.sub(lambda m, p=prefix: _key(m, p), text)
    if "://" in text:
        text = _URL_PASSWORD.sub(_url_password, text)
    lowered = text.lower()
    if len(lowered) != len(text):  # a few characters change length when lowered
        for _, pattern in _CI_RULES:
            text = pattern.sub(_keep_name, text)
        return text
    for needle, pattern in _CI_RULES:
        if needle in lowered:
            text = _sub_at(text, lowered, needle, pattern)
            lowered = text.lower()
    return text


def _key(match: re.Match[str], prefix: str | None) -> str:
    start = match.start()
    if start and match.string[start - 1] in _IDENT:
        return match.group()
    return (match.group(1) if prefix is None else prefix) + REDACTED


def _url_password(match: re.Match[str]) -> str:
    return match.group(1) + REDACTED + match.group(2)


def _keep_name(match: re.Match[str]) -> str:
    """Keep the header name / "Bearer " and the separator, redact the value."""
    groups = match.groups()
    return "".join(groups[:-1]) + REDACTED


def _sub_at(text: str, lowered: str, needle: str, pattern: re.Pattern[str]) -> str:
    out: list[str] = []
    last = pos = 0
    while True:
        index = lowered.find(needle, pos)
        if index < 0:
            break
        match = pattern.match(text, index)
        if match is None:
            pos = index + 1
            continue
        out.append(text[last:index])
        out.append(_keep_name(match))
        last = pos = match.end()
    if not out:
        return text
    out.append(text[last:])
    return "".join(out)


def redact_obj(obj: Any, env: Mapping[str, str] | None = None, *, in_place: bool = False) -> Any:
    """``obj`` with every string (values and dict keys) redacted.

    Unchanged sub-values are returned as the same objects, so a clean value comes back
    identical (``redact_obj(x) is x``). With ``in_place``, dicts and lists are modified
    where needed (key order kept) and the same top-level object is returned. Iterative:
    any nesting depth; never raises.
    """
    secrets = _env_secrets(env)
    if isinstance(obj, str):
        return _clean(obj, secrets) if obj else obj
    if not isinstance(obj, (dict, list, tuple)):
        return obj
    texts = list(_strings(obj))
    joined = "\x00".join(texts)  # one scan of everything for the usual, clean case
    if not _may_match(joined) and not any(value in joined for value, _ in secrets):
        return obj
    del joined
    if all(_clean(text, secrets) is text for text in texts):
        return obj
    if in_place and not isinstance(obj, tuple):
        _redact_in_place(obj, secrets)
        return obj
    return _redact_copy(obj, secrets)


def _strings(obj: Any) -> Iterator[str]:
    """Every non-empty string in a JSON-like value (values and keys), without recursion."""
    stack = [obj]
    seen: set[int] = set()
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            if value:
                yield value
        elif isinstance(value, (dict, list, tuple)):
            if id(value) in seen:
                continue
            seen.add(id(value))
            if isinstance(value, dict):
                for key, item in value.items():
                    if isinstance(key, str) and key:
                        yield key
                    stack.append(item)
            else:
                stack.extend(value)


def _redact_in_place(obj: Any, secrets: list[tuple[str, str]]) -> None:
    stack = [obj]
    seen: set[int] = set()
    while stack:
        value = stack.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        if isinstance(value, dict):
            items = list(value.items())
            rebuilt = []
            keys_changed = False
            for key, item in items:
                new_key = _clean(key, secrets) if isinstance(key, str) and key else key
                keys_changed = keys_changed or new_key is not key
                rebuilt.append((new_key, _in_place_item(item, secrets, stack)))
            if keys_changed:
                value.clear()
                value.update(rebuilt)
            else:
                for (key, old), (_, new) in zip(items, rebuilt, strict=True):
                    if new is not old:
                        value[key] = new
        else:  # a list
            for index, item in enumerate(value):
                new = _in_place_item(item, secrets, stack)
                if new is not item:
                    value[index] = new


def _in_place_item(item: Any, secrets: list[tuple[str, str]], stack: list[Any]) -> Any:
    if isinstance(item, str):
        return _clean(item, secrets) if item else item
    if isinstance(item, tuple):  # immutable: replaced by a redacted copy
        return _redact_copy(item, secrets)
    if isinstance(item, (dict, list)):
        stack.append(item)
    return item


def _redact_copy(obj: Any, secrets: list[tuple[str, str]]) -> Any:
    """A redacted copy sharing every unchanged sub-value (post-order, without recursion)."""
    results: dict[int, Any] = {}
    visiting: set[int] = set()
    stack: list[tuple[Any, bool]] = [(obj, False)]
    while stack:
        value, expanded = stack.pop()
        key = id(value)
        if not expanded:
            if key in results:
                continue
            if key in visiting:  # a reference cycle: that edge keeps the original
                continue
            visiting.add(key)
            stack.append((value, True))
            children = value.values() if isinstance(value, dict) else value
            for child in children:
                if isinstance(child, (dict, list, tuple)) and id(child) not in results:
                    stack.append((child, False))
            continue
        visiting.discard(key)
        if isinstance(value, dict):
            changed = False
            out: dict[Any, Any] = {}
            for k, item in value.items():
                new_k = _clean(k, secrets) if isinstance(k, str) and k else k
                new_item = _copied(item, results, secrets)
                changed = changed or new_k is not k or new_item is not item
                out[new_k] = new_item
            results[key] = out if changed else value
        else:
            items = [_copied(item, results, secrets) for item in value]
            if any(a is not b for a, b in zip(items, value, strict=True)):
                results[key] = tuple(items) if isinstance(value, tuple) else items
            else:
                results[key] = value
    return results.get(id(obj), obj)


def _copied(item: Any, results: dict[int, Any], secrets: list[tuple[str, str]]) -> Any:
    if isinstance(item, str):
        return _clean(item, secrets) if item else item
    if isinstance(item, (dict, list, tuple)):
        return results.get(id(item), item)
    return item
