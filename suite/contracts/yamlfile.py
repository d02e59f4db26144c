"""Reading a YAML file that a tool or a person writes for the suite (a question bank, a head-to-head
protocol): its bytes and data, checked against its JSON schema, with errors that name the file and the
first place it breaks the schema."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import yaml
from jsonschema import Draft202012Validator


def load_yaml_document(
    path: Path,
    schema: dict,
    error: type[Exception],
    *,
    what: str,
    not_a_mapping: str,
    where: Callable[[dict, Sequence], str],
) -> tuple[bytes, dict]:
    """The bytes and the data of the YAML file `path`, checked against `schema`. A problem raises
    `error` naming the file: it cannot be read (`what` it should hold), it is not YAML, its top level
    is not a mapping (`not_a_mapping` says so), or it breaks the schema (the first place, as `where`
    puts it, and how many more)."""
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise error(f"{path}: cannot read {what}: {e.strerror}") from e
    try:
        data = yaml.safe_load(raw)
    except yaml.YAMLError as e:
        raise error(f"{path}: not valid YAML: {e}") from e
    if not isinstance(data, dict):
        raise error(f"{path}: {not_a_mapping}")
    problems = sorted(Draft202012Validator(schema).iter_errors(data), key=lambda e: list(e.absolute_path))
    if problems:
        first = problems[0]
        more = f" (and {len(problems) - 1} more problem(s))" if len(problems) > 1 else ""
        raise error(f"{path}: {where(data, first.absolute_path)}: {first.message}{more}")
    return raw, data
