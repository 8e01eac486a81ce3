"""The console's actions: the form a POST carries, the question its confirmation asks, the domain call it makes.

Each action calls the same domain function as the CLI command of the same name. `produce` has no
confirmation step (it changes nothing already there); every other action asks first.
"""

from __future__ import annotations

from urllib.parse import quote

from clusterctl.console.present import epoch_ms
from clusterctl.errors import ClusterctlError, UsageError
from clusterctl.kafka import admin, browse, elections, groups

ACTIONS = ("create-topic", "delete-topic", "add-partitions", "elect", "produce", "alter-config", "reset-offsets",
           "delete-group")  # fmt: skip
UNCONFIRMED = ("produce",)
PREVIEWED = ("reset-offsets",)  # the confirmation shows a dry run
VERBATIM = ("value", "key", "headers")  # form fields sent as typed (not stripped)


def _int(form: dict[str, str], key: str, what: str) -> int:
    try:
        return int(form.get(key, ""))
    except ValueError:
        raise UsageError(f"{what} must be a whole number, got {form.get(key, '')!r}") from None


def _topic_name(form: dict[str, str]) -> str:
    name = form.get("topic", "")
    if not name:
        raise UsageError("a topic name is required")
    return name


def _configs(form: dict[str, str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in (p.strip() for p in form.get("configs", "").replace("\n", ",").split(",")):
        if not pair:
            continue
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--config expects key=value, got {pair!r}")
        out[key.strip()] = value.strip()
    return out


def headers(form: dict[str, str]) -> list[tuple[str, bytes]]:
    """`name=value` lines of the produce form's headers field."""
    out = []
    for line in form.get("headers", "").splitlines():
        if not line.strip():
            continue
        name, sep, value = line.partition("=")
        if not sep or not name.strip():
            raise UsageError(f"a header is name=value, got {line.strip()!r}")
        out.append((name.strip(), value.encode()))
    return out


def _config_change(form: dict[str, str]) -> tuple[str, str | None]:
    """(config name, new value), None meaning: delete the topic's override."""
    name = form.get("name", "")
    if not name:
        raise UsageError("a config name is required")
    return name, None if form.get("delete") == "yes" else form.get("value", "")


def _group(form: dict[str, str]) -> str:
    name = form.get("group", "")
    if not name:
        raise UsageError("a group id is required")
    return name


def _reset_target(form: dict[str, str]) -> groups.ResetTarget:
    to = form.get("to", "")
    if to in ("earliest", "latest"):
        return "earliest" if to == "earliest" else "latest"
    if to == "offset":
        offset = _int(form, "at", "the offset")
        if offset < 0:
            raise UsageError(f"the offset must be >= 0, got {offset}")
        return offset
    if to == "timestamp":
        ms = epoch_ms(form.get("at", ""), "the time")
        if ms is None:
            raise UsageError("a time is required (ISO date-time or epoch milliseconds)")
        return groups.AtTime(ms)
    raise UsageError(f"reset to earliest, latest, timestamp or offset, not {to!r}")


def preview(bootstrap: str, name: str, form: dict[str, str]) -> groups.ResetPlan | None:
    """The dry run a confirmation shows (refused as the CLI refuses it, e.g. while the group has members)."""
    if name != "reset-offsets":
        return None
    return groups.reset_offsets(bootstrap, _group(form), _topic_name(form), _reset_target(form))


def describe(name: str, form: dict[str, str]) -> str:
    """What the confirmation step asks about (validating the form on the way)."""
    if name == "create-topic":
        p, rf = _int(form, "partitions", "partitions"), _int(form, "replication_factor", "replication factor")
        cfg = _configs(form)
        extra = f" with {', '.join(f'{k}={v}' for k, v in cfg.items())}" if cfg else ""
        return f"Create topic {_topic_name(form)!r} with {p} partition(s), replication factor {rf}{extra}?"
    if name == "delete-topic":
        return f"Delete topic {_topic_name(form)!r} and all its data?"
    if name == "add-partitions":
        return f"Grow topic {_topic_name(form)!r} to {_int(form, 'partitions', 'partitions')} partitions?"
    if name == "alter-config":
        key, value = _config_change(form)
        if value is None:
            return f"Delete the override of {key} on topic {_topic_name(form)!r} (back to the broker's value)?"
        return f"Set {key}={value} on topic {_topic_name(form)!r}?"
    if name == "produce":
        headers(form)
        return f"Produce one record to {_topic_name(form)!r}?"
    if name == "reset-offsets":
        _reset_target(form)
        return f"Commit these offsets for group {_group(form)!r} on topic {_topic_name(form)!r}?"
    if name == "delete-group":
        return f"Delete consumer group {_group(form)!r} and its committed offsets?"
    topic = form.get("topic") or None
    return f"Run a preferred-replica election for {'topic ' + repr(topic) if topic else 'every partition'}?"


def run(bootstrap: str, name: str, form: dict[str, str]) -> str:
    """Call the same domain functions as the CLI; returns the line shown after the redirect."""
    if name == "create-topic":
        topic = _topic_name(form)
        admin.create_topic(bootstrap, topic, _int(form, "partitions", "partitions"),
                           _int(form, "replication_factor", "replication factor"), _configs(form))  # fmt: skip
        return f"created topic {topic}"
    if name == "delete-topic":
        topic = _topic_name(form)
        admin.delete_topic(bootstrap, topic)
        return f"deleted topic {topic}"
    if name == "add-partitions":
        change = admin.create_partitions(bootstrap, _topic_name(form), _int(form, "partitions", "partitions"))
        return f"topic {change.topic}: {change.note}"
    if name == "alter-config":
        topic = _topic_name(form)
        key, value = _config_change(form)
        if value is None:
            admin.alter_topic_configs(bootstrap, topic, delete=[key])
            return f"topic {topic}: override of {key} deleted"
        admin.alter_topic_configs(bootstrap, topic, {key: value})
        return f"topic {topic}: {key}={value}"
    if name == "produce":
        return _produce(bootstrap, form)
    if name == "reset-offsets":
        plan = groups.reset_offsets(bootstrap, _group(form), _topic_name(form), _reset_target(form), execute=True)
        return f"group {plan.group}: offsets of {plan.topic} reset to {plan.to} ({len(plan.partitions)} partition(s))"
    if name == "delete-group":
        return f"deleted consumer group {groups.delete_group(bootstrap, _group(form))}"
    return _elect(bootstrap, form.get("topic") or None)


def _produce(bootstrap: str, form: dict[str, str]) -> str:
    topic = _topic_name(form)
    part = form.get("partition", "").strip()
    key = form.get("key", "")
    done = browse.produce_one(bootstrap, topic, form.get("value", "").encode(), key.encode() if key else None,
                              headers(form), _int(form, "partition", "partition") if part else None)  # fmt: skip
    return f"produced 1 record to {topic}: partition {done.partition}, offset {done.offset}"


def _elect(bootstrap: str, only: str | None) -> str:
    parts = [(only, p.partition) for p in admin.describe_topic(bootstrap, only).partitions] if only else None
    results = elections.elect_leaders(bootstrap, "preferred", parts)
    failed = [r for r in results if not r.ok]
    if failed:
        raise ClusterctlError(
            f"preferred election failed for {len(failed)} partition(s); {failed[0].topic}-{failed[0].partition}: "
            f"{failed[0].error}"
        )
    return f"preferred-replica election done ({len(results)} partition(s) checked)"


def back(name: str, form: dict[str, str]) -> str:
    """The page an action returns to."""
    topic = quote(form["topic"], safe="") if form.get("topic") else None
    if name in ("reset-offsets", "delete-group"):
        return f"/groups/{quote(form['group'], safe='')}" if form.get("group") else "/groups"
    if name == "produce" and topic:
        return f"/topics/{topic}/messages"
    if name == "alter-config" and topic:
        return f"/topics/{topic}/configs"
    if name in ("add-partitions", "delete-topic") or (name == "elect" and topic):
        return f"/topics/{topic}" if topic else "/topics"
    if name == "create-topic" and topic:
        return f"/topics/{topic}"
    return "/topics"
