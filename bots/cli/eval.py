"""``memorybot eval locomo``: memory quality on LoCoMo, from the shell.

``bots/cli/main.py`` adds this with one call, ``register(app)``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from bots.cli.bench import bench_extra
from bots.cli.common import fail, print_json, run, settings
from config.settings import Settings
from memory_core.errors import InputError

if TYPE_CHECKING:
    from memorybot_bench.locomo_data import Conversation

STAGES = {"turn": "replaying turns", "question": "assembling prompts", "answer": "answering"}
COLUMNS = (
    ("memorybot", None),
    ("recent", "recent"),
    ("bm25", "bm25"),
    ("full history", "full_history"),
)


def register(app: typer.Typer) -> None:
    eval_app = typer.Typer(
        help="Memory quality on benchmarks.", no_args_is_help=True, rich_markup_mode=None
    )
    eval_app.command("locomo")(locomo)
    eval_app.command("year")(year)
    app.add_typer(eval_app, name="eval")


def locomo(
    ctx: typer.Context,
    data: Annotated[
        Path, typer.Option("--data", help="LoCoMo JSON (a list of samples, e.g. locomo10.json).")
    ],
    budget: Annotated[
        str | None,
        typer.Option(
            "--budget",
            help="Prompt budget in tokens, or several to compare in one run: 1500,3000 "
            "(default: settings).",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object, no progress.")] = False,
    answer: Annotated[
        bool,
        typer.Option("--answer", help="Also ask the configured LLM and score its answers (F1)."),
    ] = False,
    conversations: Annotated[
        int | None, typer.Option("--conversations", min=1, help="Only the first K conversations.")
    ] = None,
    questions_per_conversation: Annotated[
        int | None,
        typer.Option("--questions-per-conversation", min=1, help="Only the first Q of each."),
    ] = None,
) -> None:
    """How often the prompt holds the turns that answer LoCoMo's questions, next to baselines."""
    bench_extra("eval locomo")
    from memorybot_bench.evaluation import load_locomo

    s = settings(ctx)
    try:
        budgets: list[int | None] = list(parse_budgets(budget)) if budget else [None]
    except InputError as exc:
        raise fail(str(exc), 1) from exc
    if answer and s.llm.offline:
        raise fail("--answer needs a model: set OPENAI_API_KEY or OPENAI_BASE_URL", 1)
    try:
        convs = load_locomo(
            data,
            tz=s.memory.timezone,
            conversations=conversations,
            questions_per_conversation=questions_per_conversation,
        )
    except InputError as exc:
        raise fail(str(exc), 1) from exc
    results = _evaluate(s, convs, budgets, answer=answer, quiet=as_json)
    if as_json:
        print_json(results[0] if len(results) == 1 else {"budgets": results})
        return
    out = Console(highlight=False, markup=False, emoji=False)
    for result in results:
        _print_tables(out, result)
    if len(results) > 1:
        _print_budgets(out, results)


def _evaluate(
    s: Settings,
    convs: list[Conversation],
    budgets: list[int | None],
    *,
    answer: bool,
    quiet: bool,
) -> list[dict[str, Any]]:
    """``memorybot_bench.evaluation.evaluate_locomo`` at each budget, with a progress bar on
    stderr (unless ``quiet`` or not a terminal)."""
    from memorybot_bench.evaluation import evaluate_locomo

    err = Console(stderr=True, highlight=False, markup=False, emoji=False)
    questions = sum(len(c.questions) for c in convs) * len(budgets)
    totals = {"turn": sum(len(c.turns) for c in convs) * len(budgets), "question": questions}
    if answer:
        totals["answer"] = questions
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        disable=quiet or not err.is_terminal,
        transient=True,
    ) as progress:
        tasks = {stage: progress.add_task(STAGES[stage], total=n) for stage, n in totals.items()}
        return [
            run(
                evaluate_locomo(
                    s,
                    convs,
                    budget=one,
                    answer=answer,
                    progress=lambda stage: progress.advance(tasks[stage]),
                )
            ).as_dict()
            for one in budgets
        ]


def parse_budgets(raw: str) -> tuple[int, ...]:
    """``"1500,3000"`` as (1500, 3000): each a whole number of tokens, 500 to 200,000."""
    budgets: list[int] = []
    for part in raw.split(","):
        try:
            value = int(part.strip())
        except ValueError:
            raise InputError(
                f"--budget {raw!r}: give token counts separated by commas, e.g. 1500,3000"
            ) from None
        if not 500 <= value <= 200_000:
            raise InputError(f"--budget {value}: must be between 500 and 200000 tokens")
        if value not in budgets:
            budgets.append(value)
    return tuple(budgets)


def _print_budgets(out: Console, results: list[dict[str, Any]]) -> None:
    """Evidence-turn recall at each budget, overall and by category, side by side."""
    table = Table(title="Evidence-turn recall by budget")
    table.add_column("budget")
    table.add_column("")
    cats = results[0]["by_category"]
    table.add_column("overall", justify="right")
    for cat, m in cats.items():
        table.add_column(f"{cat} {m['name']}", justify="right")
    for r in results:
        for name, key in COLUMNS[:3]:
            m = r if key is None else r["baselines"][key]
            table.add_row(
                f"{r['budget']:,}",
                name,
                _pct(m["evidence_recall"]),
                *(_pct(m["by_category"][cat]["evidence_recall"]) for cat in cats),
            )
    out.print(table)
    spread = Table(title="memorybot's evidence-turn recall by conversation and budget")
    spread.add_column("conversation")
    for r in results:
        spread.add_column(f"{r['budget']:,}", justify="right")
    for conv in results[0]["by_conversation"]:
        spread.add_row(
            conv, *(_pct(r["by_conversation"][conv]["evidence_recall"]) for r in results)
        )
    spread.add_row("lowest", *(_pct(r["conversation_recall_min"]) for r in results))
    spread.add_row("highest", *(_pct(r["conversation_recall_max"]) for r in results))
    out.print(spread)


def _print_conversations(out: Console, r: dict[str, Any]) -> None:
    """Each conversation's evidence-turn recall, overall and by category, BM25's beside it."""
    cats = r["by_category"]
    table = Table(title=f"Evidence-turn recall by conversation (budget {r['budget']:,} tokens)")
    for heading in ("conversation", "questions", "memorybot", "bm25"):
        table.add_column(heading, justify="left" if heading == "conversation" else "right")
    for cat, m in cats.items():
        table.add_column(f"{cat} {m['name']}", justify="right")
    for conv, m in r["by_conversation"].items():
        table.add_row(
            conv,
            str(m["questions"]),
            _pct(m["evidence_recall"]),
            _pct(m["bm25_evidence_recall"]),
            *(_pct(m["by_category"][cat]) for cat in cats),
        )
    out.print(table)
    out.print(
        f"Lowest conversation {_pct(r['conversation_recall_min'])}, "
        f"highest {_pct(r['conversation_recall_max'])}.",
        markup=False,
    )


def _pct(value: Any) -> str:
    return "-" if value is None else f"{value:.1%}"


def _num(value: Any) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _print_tables(out: Console, r: dict[str, Any]) -> None:
    def of(key: str | None) -> dict[str, Any]:
        return r if key is None else r["baselines"][key]

    answered = "answer_f1" in r
    overall = Table(title=f"LoCoMo: what the prompt holds (budget {r['budget']:,} tokens)")
    for heading in ("", "evidence recall", "answer in prompt", "tokens mean", "tokens max"):
        overall.add_column(heading, justify="right" if heading else "left")
    if answered:
        overall.add_column("answer F1", justify="right")
    for name, key in COLUMNS:
        m = of(key)
        f1 = [_pct(r["answer_f1"]) if key is None else ""] if answered else []
        overall.add_row(
            name,
            _pct(m["evidence_recall"]),
            _pct(m["answer_in_prompt"]),
            _num(m["prompt_tokens_mean"]),
            _num(m["prompt_tokens_max"]),
            *f1,
        )
    out.print(overall)

    cats = r["by_category"]
    for metric, title in (
        ("evidence_recall", "Evidence-turn recall by category"),
        ("answer_in_prompt", "Answer in prompt by category"),
    ):
        table = Table(title=title)
        table.add_column("")
        for cat, m in cats.items():
            table.add_column(f"{cat} {m['name']}\n({m['questions']} q.)", justify="right")
        for name, key in COLUMNS:
            table.add_row(name, *(_pct(of(key)["by_category"][cat][metric]) for cat in cats))
        if answered and metric == "answer_in_prompt":
            by_f1 = r["answer_f1_by_category"]
            table.add_row("memorybot answer F1", *(_pct(by_f1[cat]) for cat in cats))
        out.print(table)
    _print_conversations(out, r)
    out.print(
        f"{r['conversations']} conversations, {r['turns']:,} turns, {r['questions']} questions "
        f"(categories 1-4) on the {r['store']}, in {r['seconds']:.1f} s "
        f"(replay {r['replay_seconds']:.1f} s). {r['evidence_ids_dropped']} evidence ids name "
        "no turn and were left out. Memory summaries: extractive (offline).",
        markup=False,
    )
    out.print(r["attribution"], markup=False)


def year(
    ctx: typer.Context,
    days: Annotated[int, typer.Option("--days", min=30, max=365)] = 365,
    per_day: Annotated[int, typer.Option("--per-day", min=5, max=200)] = 30,
    retention_days: Annotated[int, typer.Option("--retention-days", min=1)] = 30,
    budget: Annotated[int | None, typer.Option("--budget", min=500)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object, no table.")] = False,
) -> None:
    """A year of a busy channel, offline: how many facts said months ago (their raw messages
    expired) still reach the prompt when asked about, by age."""
    bench_extra("eval year")
    from memorybot_bench.year import evaluate_year

    s = settings(ctx)
    report = run(
        evaluate_year(s, days=days, per_day=per_day, retention_days=retention_days, budget=budget)
    )
    data = report.to_json()
    if as_json:
        print_json(data)
        return
    table = Table(title=f"{data['reached']} of {data['planted']} planted facts reach the prompt")
    for column in ("age (days)", "planted", "reached"):
        table.add_column(column)
    for row in data["by_age"]:
        table.add_row(row["age_days"], str(row["planted"]), str(row["reached"]))
    Console().print(table)
    for missed in data["missed"]:
        Console().print(
            f"missed: {missed['question']} ({missed['answer']}, {missed['age_days']} days old)",
            markup=False,
        )
