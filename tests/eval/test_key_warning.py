"""An API key bound for a plain ``http://`` URL on another machine is warned about, once per server
(`proactive_eval.judges.transport.sends_key_in_clear`); nothing is sent in these tests."""

from __future__ import annotations

import logging

import pytest

from proactive_eval.common.openai_policy import OpenAIChatPolicy
from proactive_eval.judges import OpenAIJudge, transport
from proactive_eval.judges.transport import ChatTransport, sends_key_in_clear

LOGGER = "proactive_eval.judges.transport"


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    monkeypatch.setattr(transport, "_WARNED_CLEAR", set())
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def warnings_for(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno == logging.WARNING]


@pytest.mark.parametrize(
    "url, clear",
    [
        ("http://example.org/v1", True),
        ("HTTP://Example.org:8000", True),
        ("http://10.0.0.5:8000/v1", True),
        ("http://[2001:db8::1]:8000", True),
        ("http://localhost.example.org", True),  # a name that only starts like localhost
        ("https://example.org/v1", False),
        ("https://10.0.0.5", False),
        ("http://127.0.0.1:8000/v1", False),
        ("http://127.9.9.9", False),
        ("http://localhost:8000", False),
        ("http://LOCALHOST.", False),
        ("http://judge.localhost:8000", False),
        ("http://[::1]:8000/v1", False),
        ("http://[::ffff:127.0.0.1]:8000", False),
    ],
)
def test_which_urls_send_a_key_in_clear(url, clear):
    assert sends_key_in_clear(url, "sk-test") is clear
    assert sends_key_in_clear(url, None) is False and sends_key_in_clear(url, "") is False


def test_a_key_to_a_remote_http_server_warns_once_without_the_key(caplog):
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        ChatTransport("http://user:pw@example.org:8000/v1", api_key="sk-secret")
        ChatTransport("http://user:pw@example.org:8000/v1", api_key="sk-secret")
    (message,) = warnings_for(caplog)
    assert "http://example.org:8000" in message and "unencrypted" in message and "https" in message
    assert "sk-secret" not in message and "pw" not in message


@pytest.mark.parametrize("url", ["https://example.org/v1", "http://127.0.0.1:8000/v1", "http://localhost:8000"])
def test_no_warning_for_https_or_this_machine(caplog, url):
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        ChatTransport(url, api_key="sk-secret")
    assert warnings_for(caplog) == []


def test_no_key_no_warning_and_the_environment_key_counts(caplog, monkeypatch):
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        ChatTransport("http://example.org/v1")
        assert warnings_for(caplog) == []
        monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
        ChatTransport("http://example.org/v1")
    assert len(warnings_for(caplog)) == 1


def test_the_judge_and_the_served_policy_warn_too(caplog):
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        OpenAIJudge("http://judge.example.org/v1", "m", api_key="k")
        OpenAIChatPolicy("http://policy.example.org/v1", "m", api_key="k")
    messages = warnings_for(caplog)
    assert len(messages) == 2 and "judge.example.org" in messages[0] and "policy.example.org" in messages[1]
