"""CLI for the 'acl' noun: ACLs of a cluster with an authorizer (security.authorizer), on the admin API."""

from typing import TYPE_CHECKING, Annotated

import typer

from clusterctl.cli.common import BootstrapOpt, JsonOpt, bootstrap_servers

if TYPE_CHECKING:
    from clusterctl.output import Column

acl_app = typer.Typer(name="acl", help="ACLs of a secured cluster (security.authorizer).", no_args_is_help=True)

PrincipalOpt = Annotated[str, typer.Option("--principal", help="User:NAME, NAME 1 to 128 characters")]
OperationOpt = Annotated[
    str, typer.Option("--operation", help="READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, ALL, ... (Kafka's names)")
]
TypeOpt = Annotated[str, typer.Option("--resource-type", help="TOPIC, GROUP, CLUSTER or TRANSACTIONAL_ID")]
NameOpt = Annotated[
    str,
    typer.Option(
        "--resource-name", help="the topic, group or id, 1 to 255 characters (* = all; CLUSTER: kafka-cluster)"
    ),
]
PatternOpt = Annotated[str, typer.Option("--pattern", help="LITERAL or PREFIXED")]
PermissionOpt = Annotated[str, typer.Option("--permission", help="ALLOW or DENY")]
HostOpt = Annotated[str, typer.Option("--host", help="* or the client's IP address")]


def _columns() -> "list[Column]":
    from clusterctl.output import Column

    return [Column("Principal", "principal"), Column("Permission", "permission"), Column("Operation", "operation"),
            Column("Resource type", "resource_type"), Column("Resource", "resource_name"), Column("Pattern", "pattern"),
            Column("Host", "host")]  # fmt: skip


@acl_app.command("list")
def cmd_acl_list(
    principal: Annotated[
        str | None, typer.Option("--principal", help="only this User:NAME's ACLs (NAME 1 to 128 characters)")
    ] = None,
    bootstrap_server: BootstrapOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Every ACL (or one principal's), like kafka-acls.sh --list."""
    from clusterctl.kafka import acls
    from clusterctl.output import emit

    if principal is not None:
        acls.principal(principal)
    bootstrap = bootstrap_servers(bootstrap_server)
    emit(acls.list_acls(bootstrap, principal), as_json=as_json, columns=_columns(), empty="no ACLs")


@acl_app.command("create")
def cmd_acl_create(
    principal: PrincipalOpt,
    operation: OperationOpt,
    resource_type: TypeOpt,
    resource_name: NameOpt,
    pattern: PatternOpt = "LITERAL",
    permission: PermissionOpt = "ALLOW",
    host: HostOpt = "*",
    bootstrap_server: BootstrapOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Create one ACL, like kafka-acls.sh --add (an ACL that exists already stays as it is)."""
    from clusterctl.kafka import acls
    from clusterctl.output import emit

    acl = acls.checked(acls.Acl(principal, operation, resource_type, resource_name, pattern, permission, host))
    emit(acls.create_acls(bootstrap_servers(bootstrap_server), [acl]), as_json=as_json, columns=_columns())


@acl_app.command("delete")
def cmd_acl_delete(
    principal: PrincipalOpt,
    operation: OperationOpt,
    resource_type: TypeOpt,
    resource_name: NameOpt,
    pattern: PatternOpt = "LITERAL",
    permission: PermissionOpt = "ALLOW",
    host: HostOpt = "*",
    bootstrap_server: BootstrapOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Delete the ACL that matches every option exactly, like kafka-acls.sh --remove; exit 3 when none does."""
    from clusterctl.errors import NotFoundError
    from clusterctl.kafka import acls
    from clusterctl.output import emit

    acl = acls.checked(acls.Acl(principal, operation, resource_type, resource_name, pattern, permission, host))
    deleted = acls.delete_acls(bootstrap_servers(bootstrap_server), acl)
    if not deleted:
        raise NotFoundError(f"no such ACL: {principal} {permission} {operation} on {resource_type} {resource_name}",
                            hint="clusterctl acl list")  # fmt: skip
    emit(deleted, as_json=as_json, columns=_columns())


def register(app: typer.Typer) -> None:
    """Attach `acl` to the root app."""
    app.add_typer(acl_app)
