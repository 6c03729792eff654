"""Probe extraction shares no code and no word lists with any summarizer, so that no
summarizer (the extractive baseline and its ``pinb/scripted`` stand-in included) scores by
applying the probe extractor's own rules."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pi_nb.models.extractive as extractive

ROOT = Path(__file__).resolve().parents[2] / "pi_nb"
PROBES = ROOT / "research" / "probes.py"
EXTRACTIVE = ROOT / "models" / "extractive.py"
#: Modules that write summaries (or wrap something that does).
SUMMARIZERS = (
    "pi_nb.models",
    "pi_nb.compaction.summarize",
    "pi_nb.compaction.compact",
    "pi_nb.compaction.prompts",
    "pi_nb.research.strategies",
    "pi_nb.research.tuning",
    "pi_nb.policies",
)
#: Constants of probes.py that name probe kinds and ask the judge (they select nothing).
LABELS = ("QUESTIONS", "PROBE_TYPES", "CATEGORIES", "_CATEGORY", "LIMITS", "NEEDED_LATER_LIMITS")
#: Names of the engine that produce summaries.
SUMMARY_FUNCTIONS = {"compact", "generate_summary", "extractive_summary", "serialize_conversation"}
#: The only words both modules may spell out: tool and argument names, file suffixes — how
#: transcripts are written, not what is worth keeping.
STRUCTURAL = set(
    [
        "path",
        "file_path",
        "filepath",
        "filename",
        "file",
        "command",
        "cmd",
        "read",
        "view",
        "open",
        "cat",
        "write",
        "edit",
        "patch",
        "create",
        "replace",
        "bash",
        "shell",
        "run",
        "str",
        "py",
        "pyi",
        "ipynb",
        "md",
        "rst",
        "txt",
        "toml",
        "yaml",
        "yml",
        "json",
        "jsonl",
        "cfg",
        "ini",
        "js",
        "ts",
        "tsx",
        "jsx",
        "rs",
        "go",
        "sh",
        "c",
        "h",
        "cpp",
        "java",
        "rb",
        "html",
        "css",
        "sql",
        "csv",
        "xml",
        "lock",
        "log",
    ]
)


def _imports(path: Path) -> list[tuple[str, set[str]]]:
    """(absolute module, imported names) for every import in the file, nested ones too."""
    package = "pi_nb." + ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(a.name, set()) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            if node.level:
                base = base[: len(base) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            out.append((module, {a.name for a in node.names}))
    return out


def _vocabulary(path: Path, skip: tuple[str, ...] = ()) -> set[str]:
    """Lower-case words of the strings in the module's constants (word lists, patterns)."""
    words: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign):
            targets = [node.target]
        names = [t.id for t in targets if isinstance(t, ast.Name)]
        if not names or any(n in skip or n == "__all__" for n in names):
            continue
        for inner in ast.walk(node):
            if isinstance(inner, ast.Constant) and isinstance(inner.value, str):
                text = re.sub(r"\\[A-Za-z]", " ", inner.value)  # regex escapes: \b, \s …
                words |= {w.lower() for w in re.findall(r"[A-Za-z_]{3,}", text)}
    return words


def _function_bodies(path: Path) -> dict[str, str]:
    out = {}
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                body = body[1:]  # the docstring does not make code different
            out[ast.dump(ast.Module(body=body, type_ignores=[]))] = node.name
    return out


def test_probes_import_no_summarizer() -> None:
    for module, names in _imports(PROBES):
        assert not module.startswith(SUMMARIZERS), f"probes.py imports {module}"
        assert not names & SUMMARY_FUNCTIONS, f"probes.py imports {names & SUMMARY_FUNCTIONS}"


def test_no_shared_trigger_words() -> None:
    """The words the extractive summarizer selects sentences by appear nowhere in the probe
    extractor's constants (the kind labels and the judge's questions excepted)."""
    triggers: set[str] = set()
    for pattern in (
        extractive._CONSTRAINT,
        extractive._DECISION,
        extractive._DONE,
        extractive._NEXT,
        extractive._ERROR,
    ):
        text = re.sub(r"\\[A-Za-z]", " ", pattern.pattern)
        triggers |= {w.lower() for w in re.findall(r"[A-Za-z]{3,}", text)}
    assert {"must", "decided", "because", "next", "fixed", "error"} <= triggers
    vocabulary = _vocabulary(PROBES, skip=LABELS)
    assert not triggers & vocabulary, sorted(triggers & vocabulary)


def test_word_lists_meet_only_in_structural_names() -> None:
    shared = _vocabulary(PROBES, skip=LABELS) & _vocabulary(EXTRACTIVE)
    assert shared <= STRUCTURAL, sorted(shared - STRUCTURAL)


def test_no_copied_functions() -> None:
    copied = set(_function_bodies(PROBES)) & set(_function_bodies(EXTRACTIVE))
    assert not copied, [_function_bodies(PROBES)[c] for c in copied]
