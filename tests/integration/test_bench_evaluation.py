"""The whole LoCoMo harness on a tiny invented conversation set, on a real Redis: the numbers
hang together, nothing is left behind, and the CLI prints them with the attribution."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import redis
import typer
from typer.testing import CliRunner

from bots.cli.eval import register
from memory_core.errors import LLMOffline
from memorybot_bench.evaluation import evaluate_locomo
from memorybot_bench.locomo_data import load_locomo
from tests.fakes.openai_server import FakeOpenAI, RecordedRequest
from tests.helpers import make_settings

TINY = Path(__file__).resolve().parents[1] / "data" / "locomo_tiny.json"
BUDGET = 500  # the smallest budget settings allow: the tiny conversations do not fit it


def _keys(url: str) -> list[Any]:
    client = redis.Redis.from_url(url)
    try:
        return list(client.scan_iter(match="*"))
    finally:
        client.close()


async def test_the_harness_scores_every_question_once_next_to_the_baselines(
    clean_redis: str,
) -> None:
    convs = load_locomo(TINY)
    report = await evaluate_locomo(make_settings(redis_url=clean_redis), convs, budget=BUDGET)
    data = report.as_dict()

    asked = [(c.sample_id, q.text) for c in convs for q in c.questions]
    assert len(asked) == len(set(asked)) == 13  # the category-5 question is not asked
    assert [(r.sample_id, r.question.text) for r in report.results] == asked
    assert data["questions"] == sum(c["questions"] for c in data["by_category"].values()) == 13
    assert (data["conversations"], data["turns"], data["budget"]) == (2, 52, BUDGET)
    assert data["evidence_ids_dropped"] == 1  # the bare "D"

    base = data["baselines"]
    assert set(base) == {"recent", "bm25", "full_history"}
    assert base["full_history"]["evidence_recall"] == 1.0
    assert base["recent"]["evidence_recall"] < 1.0
    assert base["full_history"]["prompt_tokens_max"] > BUDGET
    for scores in (data, base["recent"], base["bm25"]):
        assert 0.0 <= scores["evidence_recall"] <= 1.0
        assert 0 < scores["prompt_tokens_max"] <= BUDGET
    for r in report.results:
        assert r.memory.tokens <= BUDGET
        assert r.baselines["full_history"].recall == 1.0
        # The baselines pay the product's own fixed cost (persona, rules, question) and fill
        # the rest of the same budget; the whole conversation does not fit it.
        assert r.baselines["recent"].tokens <= BUDGET < r.baselines["full_history"].tokens
    # The newest turns are in the working window: their questions find their evidence.
    by_text = {r.question.text: r for r in report.results}
    assert by_text["What did Wren switch to because of her stomach?"].memory.recall == 1.0
    assert by_text["What did Wren switch to because of her stomach?"].memory.answer_in_prompt
    assert "CC BY-NC 4.0" in data["attribution"]
    assert _keys(clean_redis) == []  # the private prefix is gone


async def test_the_embedded_store_run_leaves_the_data_directory_alone(tmp_path: Path) -> None:
    data_dir = tmp_path / "memory"
    convs = load_locomo(TINY, conversations=1, questions_per_conversation=2)
    report = await evaluate_locomo(make_settings(data_dir=data_dir), convs, budget=BUDGET)
    assert report.as_dict()["questions"] == 2
    assert "temporary" in report.store
    assert not data_dir.exists()  # neither read, locked nor written


async def test_answers_are_scored_with_token_f1(clean_redis: str, fake_llm: FakeOpenAI) -> None:
    convs = load_locomo(TINY)
    gold = {q.text: q.answer for c in convs for q in c.questions}

    def answer_from_gold(request: RecordedRequest) -> str:
        asked = str(request.messages[-1]["content"])
        # The gold answer, as LoCoMo scores it (open-domain: the part before ';').
        return next(a.split(";")[0] for q, a in gold.items() if q in asked)

    fake_llm.responder = answer_from_gold
    settings = make_settings(redis_url=clean_redis, llm_url=fake_llm.base_url)
    report = await evaluate_locomo(settings, convs, budget=BUDGET, answer=True)
    data = report.as_dict()
    assert data["answer_f1"] == 1.0 and data["answer_failures"] == 0
    assert set(data["answer_f1_by_category"].values()) == {1.0}
    assert fake_llm.count("reply") == 13
    assert fake_llm.count("compact", "refresh") == 0  # memory is built offline
    assert _keys(clean_redis) == []


async def test_answering_without_a_model_is_a_clear_error(clean_redis: str) -> None:
    with pytest.raises(LLMOffline, match="OPENAI_API_KEY"):
        await evaluate_locomo(
            make_settings(redis_url=clean_redis), load_locomo(TINY), budget=BUDGET, answer=True
        )


def _cli() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def main() -> None:  # a group, so the command is reached as "eval locomo"
        pass

    register(app)
    return app


def test_the_cli_prints_json_with_the_attribution(clean_redis: str) -> None:
    args = ["eval", "locomo", "--data", str(TINY), "--budget", str(BUDGET), "--json"]
    result = CliRunner().invoke(_cli(), args, env={"REDIS_URL": clean_redis})
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["questions"] == 13 and data["budget"] == BUDGET
    assert {"recent", "bm25", "full_history"} <= set(data["baselines"])
    assert "LoCoMo" in data["attribution"]
    ids = [c.sample_id for c in load_locomo(TINY)]
    assert list(data["by_conversation"]) == ids
    recalls = [data["by_conversation"][i]["evidence_recall"] for i in ids]
    assert data["conversation_recall_min"] == min(recalls)
    assert data["conversation_recall_max"] == max(recalls)
    assert sum(data["by_conversation"][i]["questions"] for i in ids) == 13
    assert _keys(clean_redis) == []


def test_the_cli_table_carries_the_attribution(clean_redis: str) -> None:
    args = ["eval", "locomo", "--data", str(TINY), "--conversations", "1"]
    result = CliRunner().invoke(_cli(), args, env={"REDIS_URL": clean_redis, "COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "evidence recall" in result.stdout and "full history" in result.stdout
    assert "CC BY-NC 4.0" in result.stdout
    assert "by conversation" in result.stdout and load_locomo(TINY)[0].sample_id in result.stdout


def test_the_cli_compares_budgets_conversation_by_conversation(clean_redis: str) -> None:
    args = ["eval", "locomo", "--data", str(TINY), "--budget", "500,800"]
    result = CliRunner().invoke(_cli(), args, env={"REDIS_URL": clean_redis, "COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    spread = result.stdout[result.stdout.index("by conversation and budget") :]
    for conv in load_locomo(TINY):
        assert conv.sample_id in spread
    assert "lowest" in spread and "highest" in spread


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--answer"], "--answer needs a model"),
        (["--data", "missing.json"], "cannot read"),
    ],
)
def test_the_cli_refuses_what_it_cannot_do(args: list[str], message: str) -> None:
    argv = ["eval", "locomo", "--data", str(TINY), *args]
    result = CliRunner().invoke(_cli(), argv)
    assert result.exit_code == 1
    assert message in result.stderr
