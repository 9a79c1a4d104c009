"""Commands about one release: prepare it, approve or reject it, show its report, import
one published by another tool."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from serialpub.cli.app import AWAITING_SIGN_OFF, app, console, outcome_table, split_list

if TYPE_CHECKING:
    from state.store import StateStore


@app.command()
def release(
    snapshot: Annotated[
        str,
        typer.Option(
            "--snapshot",
            help="the period's snapshot: a .csv or .parquet file, or sql:TABLE / sql:SELECT ... in input_database_url",
        ),
    ],
    config: Annotated[Path, typer.Option("--config", help="serialpub.yaml or its folder")] = Path("."),
    period: Annotated[
        str | None, typer.Option("--period", help="period label (default: from the name snapshot-<period>.csv)")
    ] = None,
    skip_periods: Annotated[
        str | None,
        typer.Option("--skip-periods", help="why the periods between the last published one and this are skipped"),
    ] = None,
    allow_repeated_snapshot: Annotated[
        bool,
        typer.Option(
            "--allow-repeated-snapshot",
            help="publish a snapshot whose bytes a published release's snapshot had (recorded in the release)",
        ),
    ] = False,
) -> None:
    """Prepare the next release from one snapshot: check the inputs, anonymize, validate.
    It then waits for a sign-off ('serialpub approve' or 'serialpub reject'), unless the
    configuration approves automatically (sign_off.auto_approve), when it is published."""
    from serialpub.cli.progress import shown
    from serialpub.config import load_config
    from serialpub.errors import InputError
    from serialpub.known_breach import KnownBreach, announcement
    from serialpub.workflow.publisher import Publisher
    from serialpub.workflow.request import ReleaseRequest

    ws = load_config(config)
    if skip_periods is not None and not skip_periods.strip():
        raise InputError("--skip-periods needs the reason the periods are skipped; it is recorded")
    reason = skip_periods.strip() if skip_periods is not None else None
    request = ReleaseRequest(skip_reason=reason, allow_repeated_snapshot=allow_repeated_snapshot)
    publisher = Publisher(ws, request=request)
    if ws.config.sign_off.auto_approve:
        with shown(console):
            outcome = publisher.publish(snapshot, period)
        console.print(outcome_table([outcome], ws.config.ell))
        console.print(f"published {outcome.directory} (approved automatically: sign_off.auto_approve)")
        # no person read the risk before publication: say it here (the manifest records it)
        for model in ws.config.accept_known_breach:
            console.print(announcement(model, automatic=True), markup=False)
        return
    with shown(console):
        staged = publisher.prepare(snapshot, period, owner=AWAITING_SIGN_OFF)
    console.print(outcome_table([staged.outcome], ws.config.ell))
    report = publisher.report(staged.seq)
    for acknowledged in report.known_breach:
        console.print(announcement(KnownBreach(acknowledged)), markup=False)
    console.print(
        f"release {staged.seq} (period {staged.period!r}) passed validation and waits for its sign-off.\n"
        f"read its report before deciding: {report.report_page}\n"
        f"approve: serialpub approve --config {ws.root} --release {staged.seq} [--comment TEXT]\n"
        f"reject:  serialpub reject --config {ws.root} --release {staged.seq} --comment WHY\n"
        "(run by an account on sign_off.approvers, not the one that prepared it: the decision is recorded "
        "under the account that runs the command)"
    )


@app.command()
def approve(
    release_no: Annotated[int, typer.Option("--release", help="sequence number of the validated release")],
    by: Annotated[str | None, typer.Option("--by", help="your account name, if given (it must be yours)")] = None,
    comment: Annotated[str, typer.Option("--comment", help="recorded with the decision")] = "",
    config: Annotated[Path, typer.Option("--config", help="serialpub.yaml or its folder")] = Path("."),
    force: Annotated[
        bool, typer.Option("--force", help="decide a release whose Airflow run waits at its gate (recorded)")
    ] = False,
) -> None:
    """Approve the validated release and publish it (once it has sign_off.required_approvals
    approvals from different approvers). The decision, approver, time and the checksum of
    the release report they read are stored in the state and the manifest."""
    from serialpub.config import load_config
    from serialpub.errors import InputError
    from serialpub.workflow.publisher import Publisher
    from state.store import ReleaseStatus

    ws = load_config(config)
    publisher = Publisher(ws)
    publisher.recover()
    who = _decider(by)
    comment = _over_airflow(publisher.store, ws.config.dataset, release_no, comment, force)
    sign_off = publisher.approve(release_no, who, comment)
    waiting = publisher.store.open_release(ws.config.dataset)
    if waiting is not None and waiting.seq == release_no and waiting.status != ReleaseStatus.APPROVED:
        required = ws.config.sign_off.required_approvals
        given = len(publisher.store.approvals(waiting.id))
        console.print(
            f"release {release_no} of {ws.config.dataset!r}: approval {given} of {required} recorded "
            f"({sign_off.approver}); not published yet: it needs {required - given} more from other approvers "
            "(sign_off.required_approvals)",
            markup=False,
        )
        return
    try:
        _ = publisher.signing_key  # the approver's account may not hold the publisher's key
    except InputError as exc:
        console.print(
            f"release {release_no} of {ws.config.dataset!r} approved by {sign_off.approver}; not published yet: {exc}. "
            f"The account holding the key publishes it: serialpub publish --config {ws.root} --release {release_no}",
            markup=False,
        )
        return
    final = publisher.finish(release_no)
    console.print(f"release {release_no} of {ws.config.dataset!r} approved by {sign_off.approver}; published {final}")


@app.command()
def publish(
    release_no: Annotated[int, typer.Option("--release", help="sequence number of the approved release")],
    config: Annotated[Path, typer.Option("--config", help="serialpub.yaml or its folder")] = Path("."),
) -> None:
    """Publish a release an approver has approved (run by the account holding the signing
    key, when the approver's does not): re-check the staged files, sign, publish."""
    from serialpub.config import load_config
    from serialpub.workflow.publisher import Publisher

    ws = load_config(config)
    publisher = Publisher(ws)
    publisher.recover()
    final = publisher.finish(release_no)
    console.print(f"release {release_no} of {ws.config.dataset!r} published {final}")


@app.command("public-copy")
def public_copy(
    out: Annotated[Path, typer.Option("--out", help="folder to write the public copy into (outside the workspace)")],
    config: Annotated[Path, typer.Option("--config", help="serialpub.yaml or its folder")] = Path("."),
    with_register: Annotated[
        bool, typer.Option("--with-register", help="also copy register.csv, which 'serialpub audit' reads")
    ] = False,
) -> None:
    """Copy the published releases as the public receives them: data.parquet, manifest.json
    and manifest.sig of each, the hierarchies and the public key, without the evidence
    (reports, validation results), which holds figures computed from the raw snapshot."""
    from serialpub.config import load_config
    from serialpub.workflow.dataset_series import DatasetSeries
    from serialpub.workflow.public_copy import write_public_copy

    ws = load_config(config)
    done = write_public_copy(DatasetSeries(ws), out, with_register)
    span = f"releases {done.releases[0]}-{done.releases[-1]}" if done.releases else "no release yet"
    console.print(f"public copy of {ws.config.dataset!r} ({span}) in {out}: {done.written} file(s) written")


@app.command()
def report(
    config: Annotated[Path, typer.Option("--config", help="serialpub.yaml or its folder")] = Path("."),
    release_no: Annotated[
        int | None, typer.Option("--release", help="show this release's report instead of writing the series report")
    ] = None,
    baseline: Annotated[
        bool, typer.Option("--baseline/--no-baseline", help="replay the localized baseline for comparison")
    ] = True,
    figures: Annotated[
        Path | None, typer.Option("--figures", help="also write the series figures as PNG files into this folder")
    ] = None,
) -> None:
    """Write the series report (every published release, with the localized baseline), or
    with --release print where that release's report is (written when it was validated)."""
    from serialpub.config import load_config
    from serialpub.workflow.publisher import Publisher

    ws = load_config(config)
    publisher = Publisher(ws)
    if release_no is not None:
        console.print(str(publisher.report_page(release_no)))
        return
    console.print(f"series report: {publisher.series_report(baseline, figures)}")


@app.command()
def reject(
    release_no: Annotated[int, typer.Option("--release", help="sequence number of the open release")],
    by: Annotated[str | None, typer.Option("--by", help="your account name, if given (it must be yours)")] = None,
    comment: Annotated[str, typer.Option("--comment", help="why (recorded)")] = "",
    config: Annotated[Path, typer.Option("--config", help="serialpub.yaml or its folder")] = Path("."),
    force: Annotated[
        bool, typer.Option("--force", help="decide a release whose Airflow run waits at its gate (recorded)")
    ] = False,
) -> None:
    """Reject the release being prepared: its staged files are removed, the state is unchanged."""
    from serialpub.config import load_config
    from serialpub.workflow.publisher import reject_release
    from state.store import StateStore, open_engine

    ws = load_config(config)
    who = _decider(by)
    store = StateStore(open_engine(ws.database_url))
    comment = _over_airflow(store, ws.config.dataset, release_no, comment, force)
    rejected = reject_release(ws, release_no, who, comment)
    console.print(f"release {rejected.seq} (period {rejected.period!r}) of {ws.config.dataset!r} rejected by {who}")


def _decider(by: str | None) -> str:
    """The identity of a command-line sign-off: the operating-system account running the
    command (serialpub.workflow.identity). ``--by`` may only repeat it.

    Raises:
        InputError: ``--by`` names someone else.
    """
    from serialpub.errors import InputError
    from serialpub.workflow.identity import normalize_name, os_login

    login = os_login()
    if by is not None and normalize_name(by, "--by") != login:
        raise InputError(
            f"--by {by!r}: a sign-off is recorded under the account that runs the command ({login!r}); "
            "the approver runs it under their own account (leave out --by)"
        )
    return login


@app.command("import-release")
def import_release_command(
    data: Annotated[
        Path, typer.Option("--data", help="the release as published: Parquet or CSV, QI node labels + sensitive")
    ],
    period: Annotated[str, typer.Option("--period", help="its period label (later than the last published)")],
    ell: Annotated[float, typer.Option("--l", help="ℓ the other tool enforced")],
    protected: Annotated[str, typer.Option("--protected", help="'all' or comma-separated protected values")],
    dilution: Annotated[str, typer.Option("--dilution", help="register or presence")],
    config: Annotated[Path, typer.Option("--config", help="serialpub.yaml or its folder")] = Path("."),
    snapshot: Annotated[
        Path | None, typer.Option("--snapshot", help="CSV of the present individuals (needed for presence)")
    ] = None,
    strategy_name: Annotated[
        str | None, typer.Option("--strategy", help="constant or geometric (default: the configuration's)")
    ] = None,
    k_prime: Annotated[int | None, typer.Option("--k-prime", help="k' of the constant-ratio strategy")] = None,
    alpha: Annotated[float | None, typer.Option("--alpha", help="α of the geometric strategy")] = None,
) -> None:
    """Record a release published with another tool as the dataset's next release."""
    from serialpub.config import load_config
    from serialpub.workflow.importing import import_release

    ws = load_config(config)
    values: str | list[str] = "all" if protected.strip() == "all" else split_list(protected)
    o = import_release(ws, data, period, ell, values, dilution, snapshot, strategy_name, k_prime, alpha)
    console.print(
        f"imported {data} as release {o.seq} (period {o.period!r}): {o.records} records in {o.groups} groups, "
        f"{o.avg_candidates:.0f} candidates per group on average (max {o.max_candidates}), "
        f"max p = {o.max_breach:.4f} (bound 1/ℓ = {1 / ell:.4f})",
        markup=False,
        highlight=False,
    )
    console.print(f"published {o.directory}", markup=False, highlight=False)
    if o.exceeds_bound:
        console.print(
            "warning: after this release some individual's breach probability exceeds 1/ℓ; the tables are "
            "public already, so the state records it; later releases cannot lower it",
            markup=False,
            highlight=False,
        )


def _over_airflow(store: StateStore, dataset: str, seq: int, comment: str, force: bool) -> str:
    """The comment to record for a command-line decision on release ``seq``. A release an
    Airflow run prepared is decided at that run's gate, so that the run and the state never
    disagree; ``--force`` decides it here anyway and says so in the recorded comment.

    Raises:
        InputError: the release belongs to an Airflow run and ``force`` is not set.
    """
    from serialpub.errors import InputError

    current = store.open_release(dataset)
    if current is None or current.seq != seq or not current.owner.startswith("airflow:"):
        return comment
    if not force:
        raise InputError(
            f"release {seq} of {dataset!r} waits at the sign-off gate of {current.owner}: answer it there "
            "(Airflow's Required Actions), or decide here with --force, which is recorded and leaves that run to fail"
        )
    return f"{comment} [decided from the command line with --force over {current.owner}]".strip()
