"""``composer eval``: measure the context a manifest gives the team's own labelled questions,
alone or side by side with another environment, folder or git revision
(``composer.inspect.evaluation`` runs them)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from composer.cli.exit_codes import FAILURE, SUCCESS, USAGE
from composer.cli.options import add_json

if TYPE_CHECKING:
    from composer.cli.output import Output
    from composer.inspect.documents import EvalDocument
    from composer.inspect.evaluation import Floor, Scores
    from composer.inspect.questions import Questions

__all__ = ["DESCRIPTION", "add_arguments", "run"]

DESCRIPTION = (
    "Ask each question of QUESTIONS (a YAML file kept next to the manifests: manifest, env, "
    "and per question an instruction and the passages that should reach the model, per "
    "provider) as a real turn, and measure per provider and overall, at --k: nDCG, recall "
    "and MRR of the provider's ranked candidates, injected recall (the share of relevant "
    "passages that reached the model-visible text) and relevant token share (the share of "
    "injected tokens from relevant passages). Side by side with deltas: --env A --env B, "
    "OTHER (a second manifest folder or file), or --rev A..B (the manifest folder at two git "
    "revisions; --rev A compares A with the working tree). --min PROVIDER.MEASURE=VALUE "
    "fails the run below a floor (the second side's, when comparing). Exit 0, 1 when a "
    "floor is not met or a question cannot run."
)

_HEADERS = ("provider", "nDCG@{k}", "recall@{k}", "MRR@{k}", "injected recall", "relevant tokens")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("questions", metavar="QUESTIONS", help="e.g. configs/questions.yaml")
    parser.add_argument(
        "other", metavar="OTHER", nargs="?", help="a second manifest folder or file to compare"
    )
    parser.add_argument("--k", type=int, default=10, help="rank cut-off of the measures")
    parser.add_argument(
        "--env", action="append", help="the environment, or two to compare: --env A --env B"
    )
    parser.add_argument("--rev", help="git revisions of the manifest folder: A..B, A.. or A")
    parser.add_argument(
        "--min",
        action="append",
        default=[],
        metavar="PROVIDER.MEASURE=VALUE",
        help="fail below this floor, e.g. runbooks.recall=0.8 or overall.ndcg=0.7 (repeatable)",
    )
    parser.add_argument("--junit", metavar="FILE", help="also write the results as JUnit XML")
    parser.add_argument(
        "--from-environment",
        action="store_true",
        help="also read ${VAR} from the environment, as other commands do (the file's first)",
    )
    add_json(parser)


def run(args: argparse.Namespace, output: Output) -> int:
    from composer.errors import ManifestError, SettingsError
    from composer.inspect.evaluation import parse_floor
    from composer.inspect.questions import load_questions

    output.name_files_as(args.questions)
    if args.k < 1:
        output.error(f"composer eval: --k must be at least 1, got {args.k}")
        return USAGE
    envs: list[str] = args.env or []
    if len(envs) > 2 or (len(envs) == 2 and (args.other or args.rev)):
        output.error("composer eval: compare two environments, or one of two folders or revisions")
        return USAGE
    if args.other is not None and args.rev is not None:
        output.error("composer eval: give OTHER or --rev, not both")
        return USAGE
    try:
        floors = [parse_floor(spec) for spec in args.min]
        questions = load_questions(args.questions)
    except SettingsError as e:
        output.error(f"composer eval: {e}")
        return USAGE
    except ManifestError as e:
        for error in e.errors:
            output.error(f"{error.location}: {error.message}")
        return FAILURE
    shown = output.muted() if args.json else output  # results: as JSON
    try:
        sides = _sides(args, questions, envs, shown)
    except SettingsError as e:
        output.error(f"composer eval: {e}")
        return FAILURE
    return _report(args, output, shown, sides, floors)


def _sides(
    args: argparse.Namespace, questions: Questions, envs: list[str], output: Output
) -> list[Scores]:
    """The figures of each side: one, or two to compare."""
    from composer.cli.terminate import run as run_until_done
    from composer.inspect.evaluation import evaluate
    from composer.inspect.revisions import checkout, split_range

    count = len(questions.model.questions)
    output.print(f"{args.questions}: {count} question{'s' if count != 1 else ''}, k={args.k}")
    common = {"k": args.k, "from_environment": args.from_environment}
    if len(envs) == 2:
        return [
            run_until_done(evaluate(questions, env=env, label=f"env {env}", **common))
            for env in envs
        ]
    env = envs[0] if envs else None
    if args.other is not None:
        manifest = str(questions.manifest_path)
        return [
            run_until_done(evaluate(questions, env=env, label=shown, manifest=path, **common))
            for shown, path in ((questions.model.manifest, manifest), (args.other, args.other))
        ]
    if args.rev is not None:
        old, new = split_range(args.rev)
        sides = []
        for rev in (old, new):
            with checkout(str(questions.manifest_path), rev) as side:
                label = rev or "working tree"
                sides.append(
                    run_until_done(
                        evaluate(questions, env=env, label=label, manifest=side.path, **common)
                    )
                )
        return sides
    return [run_until_done(evaluate(questions, env=env, **common))]


def _report(
    args: argparse.Namespace,
    output: Output,
    shown: Output,
    sides: list[Scores],
    floors: list[Floor],
) -> int:
    """Print the figures on ``shown`` (muted under --json), the JSON document on ``output``."""
    from composer.inspect.evaluation import floors_failed, junit_xml

    for side in sides:
        for problem in side.problems:
            shown.error(output.relative(f"{problem.where}: {problem.message}"))
    if len(sides) == 1:
        _table(shown, sides[0])
    else:
        _compared(shown, sides[0], sides[1])
    last = sides[-1]
    failed = floors_failed(last, floors)
    for sentence in failed:
        shown.print(f"below the floor: {sentence}")
    if args.junit:
        with open(args.junit, "wb") as handle:
            handle.write(junit_xml(args.questions, last, floors))
    if args.json:
        from composer.cli.output import print_document

        print_document(output, _document(args.k, sides, failed))
    ok = not failed and not any(side.problems for side in sides)
    return SUCCESS if ok else FAILURE


def _cells(name: str, measures: dict[str, float]) -> list[str]:
    return [name, *(f"{value:.3f}" for value in measures.values())]


def _table(output: Output, scores: Scores) -> None:
    """One side: a row per provider, then the overall mean."""
    from composer.inspect.metrics import MEASURES

    if scores.label:
        output.print(f"manifest: {scores.label}")
    rows = [[h.format(k=scores.k) for h in _HEADERS]]
    for name, measures in scores.providers.items():
        rows.append(_cells(name, measures.as_dict()))
    rows.append(_cells("overall", scores.overall.as_dict()))
    _print_rows(output, rows, right=set(range(1, len(MEASURES) + 1)))
    output.print(f"tokens admitted per question: {scores.tokens:.1f} (mean)")


def _compared(output: Output, before: Scores, after: Scores) -> None:
    """Two sides: per provider and measure, before, after and the change."""
    from composer.inspect.metrics import MEASURES

    output.print(f"{before.label} -> {after.label}")
    rows = [["provider", "measure", before.label, after.label, "change"]]
    names = [*dict.fromkeys([*before.providers, *after.providers]), "overall"]
    for name in names:
        old = before.overall if name == "overall" else before.providers.get(name)
        new = after.overall if name == "overall" else after.providers.get(name)
        for measure in MEASURES:
            a = getattr(old, measure) if old is not None else None
            b = getattr(new, measure) if new is not None else None
            change = f"{b - a:+.3f}" if a is not None and b is not None else ""
            rows.append(
                [
                    name,
                    measure.replace("_", " "),
                    "-" if a is None else f"{a:.3f}",
                    "-" if b is None else f"{b:.3f}",
                    change,
                ]
            )
    rows.append(
        [
            "tokens",
            "per question",
            f"{before.tokens:.1f}",
            f"{after.tokens:.1f}",
            f"{after.tokens - before.tokens:+.1f}",
        ]
    )
    _print_rows(output, rows, right={2, 3, 4})


def _print_rows(output: Output, rows: list[list[str]], right: set[int]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        cells = [
            cell.rjust(width) if i in right else cell.ljust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ]
        output.print("  ".join(cells).rstrip())


def _document(k: int, sides: list[Scores], failed: list[str]) -> EvalDocument:
    """``{"version": 1, "k": K, "providers": …, "overall": …}`` (of the second side when
    comparing, with ``compared`` holding both sides and the deltas)."""
    from composer.inspect.documents import EvalDocument, EvalSide

    last = sides[-1]

    def side(scores: Scores) -> EvalSide:
        return EvalSide.model_validate(
            {
                "label": scores.label,
                "questions": scores.questions,
                "tokens": round(scores.tokens, 1),
                **scores.as_dict(),
            }
        )

    compared = None
    if len(sides) == 2:
        compared = [side(sides[0]), side(sides[1])]
    document = EvalDocument(
        k=k,
        providers={n: m.as_dict() for n, m in last.providers.items()},
        overall=last.overall.as_dict(),
        questions=last.questions,
        tokens=round(last.tokens, 1),
        below_floor=failed,
        problems=[f"{p.where}: {p.message}" for s in sides for p in s.problems],
        compared=compared,
        delta=_delta(sides[0], sides[1]) if len(sides) == 2 else None,
    )
    return document


def _delta(before: Scores, after: Scores) -> dict[str, dict[str, float]]:
    """After minus before, per provider on both sides and overall."""
    shared = [name for name in after.providers if name in before.providers]
    pairs = [(n, before.providers[n], after.providers[n]) for n in shared]
    pairs.append(("overall", before.overall, after.overall))
    return {
        name: {m: round(new.as_dict()[m] - old.as_dict()[m], 6) for m in new.as_dict()}
        for name, old, new in pairs
    }
