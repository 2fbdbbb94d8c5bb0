"""Settings and prompt templates. Importing this package reads nothing and connects to nothing."""

from config.prompts import LANGUAGES, PromptSet, load_prompts
from config.settings import Settings, SettingsError, env_name_for, load_settings

__all__ = [
    "LANGUAGES",
    "PromptSet",
    "Settings",
    "SettingsError",
    "env_name_for",
    "load_prompts",
    "load_settings",
]
