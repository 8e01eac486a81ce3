"""CLI for the 'user' noun: SCRAM users of a secured cluster (security.protocol SASL_*), on the admin API."""

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import typer

from clusterctl.cli.common import JsonOpt, get_spec

user_app = typer.Typer(name="user", help="SCRAM users of a secured cluster (SASL_*).", no_args_is_help=True)


@user_app.command("list")
def cmd_user_list(as_json: JsonOpt = False) -> None:
    """Every user with a SCRAM credential and its mechanisms (never a password)."""
    from clusterctl.kafka import scram
    from clusterctl.output import Column, emit

    users = scram.list_users(get_spec().topology.bootstrap_servers)
    emit(users, as_json=as_json, columns=[Column("User", "user"), Column("Mechanisms", "mechanisms")], empty="no users")


def _name(value: str) -> str:
    from clusterctl.errors import UsageError
    from clusterctl.spec.security import USER_NAME_RE
    from clusterctl.spec.validate import MAX_USER_NAME_LENGTH

    if len(value) > MAX_USER_NAME_LENGTH or not USER_NAME_RE.match(value):
        raise UsageError(f"user name {value[:80]!r} must be 1-{MAX_USER_NAME_LENGTH} chars of letters, digits, . _ -")
    return value


def _show(change: object, as_json: bool) -> None:
    from clusterctl.output import Column, emit

    emit(change, as_json=as_json, kv=[Column("User", "user"), Column("Role", "role"), Column("Mechanism", "mechanism"),
                                      Column("ACLs", "acls"), Column("Password kept in", "password_file")])  # fmt: skip


@user_app.command("create")
def cmd_user_create(
    name: Annotated[str, typer.Argument(help="1 to 64 characters of letters, digits, . _ -")],
    role: Annotated[Literal["producer", "consumer"], typer.Option("--role", help="producer or consumer")] = "consumer",
    as_json: JsonOpt = False,
) -> None:
    """A SCRAM user with a generated password (kept in compose/<name>/secrets/users.json, never printed) and its
    role's ACLs; admins are super users and live in the spec (security.users)."""
    from clusterctl.kafka import scram

    checked = _name(name)  # before the spec is read
    _show(scram.create_user(get_spec(), checked, role), as_json)


@user_app.command("delete")
def cmd_user_delete(
    name: Annotated[str, typer.Argument(help="a user `user create` made")], as_json: JsonOpt = False
) -> None:
    """Delete a user `user create` made: its credential, every ACL naming it and its kept password."""
    from clusterctl.kafka import scram

    checked = _name(name)
    _show(scram.drop_user(get_spec(), checked), as_json)


@dataclass
class ClientConfig:
    user: str
    format: str
    path: str  # 0600: it holds the user's password


def cmd_client_config(
    user: Annotated[
        str | None, typer.Option("--user", help="a SCRAM user, 1 to 64 characters; default: the first admin")
    ] = None,
    fmt: Annotated[
        Literal["properties", "librdkafka"],
        typer.Option("--format", help="properties (Kafka's tools: --command-config) or librdkafka (a JSON dict)"),
    ] = "properties",
    output: Annotated[Path, typer.Option("--output", "-o", help="a new file (0600: it holds the password)")] = Path(
        "client.properties"
    ),
    as_json: JsonOpt = False,
) -> None:
    """Client settings of the secured cluster for other tools, as USER: its password goes into the file (0600),
    never to the terminal."""
    import json

    from clusterctl.compose import secrets
    from clusterctl.errors import UsageError
    from clusterctl.output import Column, emit

    name = _name(user) if user is not None else None
    spec = get_spec()
    if not spec.security.enabled:
        raise UsageError(f"cluster {spec.name} is PLAINTEXT (no security section): no client settings to export")
    name = name or (spec.security.admin.name if spec.security.admin else None)
    if fmt == "properties":
        text = secrets.java_client_properties(spec, name)
    else:
        conf = {"bootstrap.servers": spec.topology.bootstrap_servers, **secrets.client_settings(spec, name)}
        text = json.dumps(conf, indent=2) + "\n"
    secrets.write_private(output, text)
    result = ClientConfig(name or "-", fmt, str(output))
    emit(result, as_json=as_json, kv=[Column("User", "user"), Column("Format", "format"), Column("Written to", "path")])


def register(app: typer.Typer) -> None:
    """Attach `user` and `client-config` to the root app."""
    app.add_typer(user_app)
    app.command("client-config")(cmd_client_config)
