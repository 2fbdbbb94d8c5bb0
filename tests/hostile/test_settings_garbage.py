"""Settings come from files and environments people edit by hand: whatever is in them,
``load_settings`` returns Settings or raises SettingsError naming the file or the field
(and its environment variable) to fix. No other exception reaches start-up."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from config.settings import WELL_KNOWN_ENV, Settings, SettingsError, env_name_for, load_settings
from tests.hostile.strategies import HYPOTHESIS, NASTY, hostile_text

SECTIONS: dict[str, tuple[str, ...]] = {
    name: tuple(model.model_fields)
    for name, model in (
        (field, Settings.model_fields[field].annotation) for field in Settings.model_fields
    )
    if isinstance(model, type)
}


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("settings")


def toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key, ensure_ascii=False)


@dataclass(frozen=True)
class RawToml:
    """TOML written as is: numbers too long for Python (and hypothesis) to print as ints."""

    text: str


def toml_value(value: Any) -> str:
    """A TOML literal (tomli_w is not installed; this covers what the strategies make)."""
    if isinstance(value, RawToml):
        return value.text
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    items = ", ".join(f"{toml_key(k)} = {toml_value(v)}" for k, v in value.items())
    return "{" + items + "}"


def toml_document(data: dict[str, Any]) -> str:
    lines = [f"{toml_key(k)} = {toml_value(v)}" for k, v in data.items() if not isinstance(v, dict)]
    for section, body in data.items():
        if isinstance(body, dict):
            lines.append(f"[{toml_key(section)}]")
            lines += [f"{toml_key(k)} = {toml_value(v)}" for k, v in body.items()]
    return "\n".join(lines) + "\n"


scalars = st.one_of(
    st.booleans(),
    st.integers(),
    st.integers(4_301, 5_000).map(lambda n: RawToml("9" * n)),  # past Python's int limit
    st.floats(),
    hostile_text(max_size=40),
    st.sampled_from(("Asia/Tokyo", "Asia", "redis://:pw@127.0.0.1:1/0", "mention", "ja")),
)
values: st.SearchStrategy[Any] = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=8,
)
section_names = st.one_of(st.sampled_from(tuple(SECTIONS)), st.text(max_size=8))


@st.composite
def settings_documents(draw: st.DrawFn) -> dict[str, Any]:
    """Real sections with real and made-up fields, and made-up top-level keys."""
    document: dict[str, Any] = {}
    for section in draw(st.lists(section_names, max_size=4, unique=True)):
        fields = SECTIONS.get(section, ("x",))
        keys = draw(st.lists(st.one_of(st.sampled_from(fields), st.text(max_size=8)), max_size=4))
        document[section] = {key: draw(values) for key in keys}
    if draw(st.booleans()):
        document[draw(st.text(max_size=8))] = draw(scalars)
    return document


def check_file(path: Path) -> Settings | SettingsError:
    """Load ``path``; a SettingsError must name the file or a field in it."""
    try:
        loaded = load_settings(path)
    except SettingsError as exc:
        message = str(exc)
        assert message.strip()
        names_a_field = re.search(r"\b[a-z_]+\.[A-Za-z_\d]*", message) is not None
        assert str(path) in message or names_a_field, message
        assert "Traceback" not in message
        return exc
    assert isinstance(loaded, Settings)
    return loaded


@HYPOTHESIS
@given(raw=st.binary(max_size=300))
def test_arbitrary_bytes_are_settings_or_a_settings_error(folder: Path, raw: bytes) -> None:
    """Binary junk, truncated UTF-8, a UTF-16 BOM: SettingsError naming the file."""
    path = folder / "bytes.toml"
    path.write_bytes(raw)
    check_file(path)


@HYPOTHESIS
@given(raw=hostile_text(max_size=300))
def test_tomlish_text_is_settings_or_a_settings_error(folder: Path, raw: str) -> None:
    """Half-TOML text with lone surrogates and control characters (written as they come,
    surrogates and all)."""
    path = folder / "text.toml"
    path.write_bytes(raw.encode("utf-8", "surrogatepass"))
    check_file(path)


@HYPOTHESIS
@given(document=settings_documents())
def test_nested_values_of_any_type_are_settings_or_a_settings_error(
    folder: Path, document: dict[str, Any]
) -> None:
    """Well-formed TOML with wrong types, unknown keys, 4,000-digit numbers, NaN and
    infinities, and hostile strings in every real field."""
    path = folder / "nested.toml"
    path.write_bytes(toml_document(document).encode("utf-8", "surrogatepass"))
    check_file(path)


PATHOLOGICAL_FILES = {
    "nested-arrays": b"a = " + b"[" * 50_000 + b"]" * 50_000,
    "nested-tables": b"a = " + b"{b = " * 2_000 + b"1" + b"}" * 2_000,
    "utf16": "[memory]\nbudget_tokens = 1\n".encode("utf-16"),
    "latin1": b"[bot]\nname = '\xe9t\xe9'\n",
    "huge-int": b"[memory]\nbudget_tokens = 1" + b"0" * 5_000 + b"\n",
    "tz-directory": b"[memory]\ntimezone = 'Asia'\n",
    "tz-too-long": b"[memory]\ntimezone = '" + b"a" * 300 + b"'\n",
    "tz-traversal": b"[memory]\ntimezone = '../../etc/passwd'\n",
    "tz-nul": b"[memory]\ntimezone = 'Asia/Tokyo\\u0000'\n",
    "tz-package-file": b"[memory]\ntimezone = '__init__.py'\n",
    "section-not-table": b"memory = 5\n",
    "array-of-tables": b"[[memory]]\nbudget_tokens = 1\n",
    "datetime-for-int": b"[scheduler]\nweekly_hour = 1979-05-27T07:32:00Z\n",
    "list-of-junk": b"[discord]\nadmin_user_ids = ['x', {a = 1}, [1]]\n",
}


@pytest.mark.parametrize("raw", PATHOLOGICAL_FILES.values(), ids=PATHOLOGICAL_FILES.keys())
def test_pathological_files_name_the_file_or_field(tmp_path: Path, raw: bytes) -> None:
    """Deep nesting, other encodings, giant numbers, timezones that are directories, too
    long or path tricks: SettingsError, never RecursionError/OSError/UnicodeDecodeError."""
    path = tmp_path / "memorybot.toml"
    path.write_bytes(raw)
    check_file(path)


def test_a_timezone_that_is_a_directory_is_named() -> None:
    """ "Asia" is a folder of the tz database, not a zone: the error says which setting."""
    with pytest.raises(SettingsError) as info:
        load_settings(None, memory={"timezone": "Asia"})
    assert "memory.timezone" in str(info.value) and "Asia" in str(info.value)


# -- environment -----------------------------------------------------------------------
ENV_NAMES = (
    *WELL_KNOWN_ENV,
    *(env_name_for(section, field) for section, fields in SECTIONS.items() for field in fields),
    *(f"MEMORYBOT_{section.upper()}" for section in SECTIONS),  # a whole section, as JSON
    "MEMORYBOT_CONFIG",
)
env_values = st.one_of(
    hostile_text(max_size=60).map(lambda t: t.replace("\x00", "")),
    st.sampled_from(("[", "{", "[" * 5_000, "1" * 5_000, "null", "[1, 2", '{"a": }', "1e999")),
    values.map(lambda v: json.dumps(v, default=lambda raw: raw.text)),
)


def check_env(env: dict[str, str], folder: Path) -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(folder)
        for name, value in env.items():
            try:
                mp.setenv(name, value.encode("utf-8", "replace").decode("utf-8"))
            except ValueError:  # the OS refuses the value (e.g. NUL); nothing to test
                continue
        try:
            loaded = load_settings()
        except SettingsError as exc:
            message = str(exc)
            named = any(name in message for name in env) or re.search(r"[a-z]+\.[a-z_]+", message)
            assert named or "settings file" in message, message
            return
        assert isinstance(loaded, Settings)


@HYPOTHESIS
@given(env=st.dictionaries(st.sampled_from(ENV_NAMES), env_values, min_size=1, max_size=4))
def test_garbage_environment_is_settings_or_a_settings_error(
    folder: Path, env: dict[str, str]
) -> None:
    """Any value in any of memorybot's environment variables (JSON lists that are not
    JSON, 5,000 nested brackets, timezones that are folders): Settings or SettingsError
    naming the variable or the field."""
    check_env(env, folder)


PATHOLOGICAL_ENV = {
    "list-not-json": {"MEMORYBOT_DISCORD__ADMIN_USER_IDS": "not json"},
    "section-not-json": {"MEMORYBOT_MEMORY": "{bad"},
    "deep-json": {"MEMORYBOT_SLACK__ADMIN_USER_IDS": "[" * 10_000},
    "tz-directory": {"MEMORYBOT_MEMORY__TIMEZONE": "Asia"},
    "tz-too-long": {"MEMORYBOT_MEMORY__TIMEZONE": "x" * 300},
    "huge-int": {"MEMORYBOT_MEMORY__BUDGET_TOKENS": "9" * 5_000},
    "config-is-a-dir": {"MEMORYBOT_CONFIG": "/"},
    "config-missing": {"MEMORYBOT_CONFIG": "/nonexistent/memorybot.toml"},
    "config-too-long": {"MEMORYBOT_CONFIG": "c" * 5_000},
    "config-long-path": {"MEMORYBOT_CONFIG": "/".join(["d" * 200] * 30)},
    "redis-url-junk": {"REDIS_URL": "\x01\x02 not a url {}"},
}


@pytest.mark.parametrize("env", PATHOLOGICAL_ENV.values(), ids=PATHOLOGICAL_ENV.keys())
def test_pathological_environment_names_the_variable(tmp_path: Path, env: dict[str, str]) -> None:
    """The cases that used to escape as pydantic-settings' own SettingsError,
    RecursionError or IsADirectoryError."""
    check_env(env, tmp_path)


def test_a_list_variable_that_is_not_json_names_the_variable(tmp_path: Path) -> None:
    """The message says which variable to fix, not pydantic-settings' internals."""
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(tmp_path)
        mp.setenv("MEMORYBOT_DISCORD__ADMIN_USER_IDS", "12, 34")
        with pytest.raises(SettingsError) as info:
            load_settings()
    assert "MEMORYBOT_DISCORD__ADMIN_USER_IDS" in str(info.value)
    assert "JSON" in str(info.value)


def test_nasty_strings_fill_every_string_field(tmp_path: Path) -> None:
    """Each hand-picked nasty string in each field of each section, one file per string."""
    for i, nasty in enumerate(NASTY):
        document = {section: dict.fromkeys(fields, nasty) for section, fields in SECTIONS.items()}
        path = tmp_path / f"nasty{i}.toml"
        path.write_bytes(toml_document(document).encode("utf-8", "surrogatepass"))
        check_file(path)
