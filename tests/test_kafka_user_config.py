"""The user's Kafka properties: the file format, the environment over it, and the refusal of a
value that would break a guarantee (one line naming the property, the value and why)."""

from __future__ import annotations

import pytest

from streamproc.kafka.config import admin_config, consumer_config, producer_config
from streamproc.kafka.user_config import KafkaConfigError, parse_properties, user_properties
from streamproc.settings import Settings


@pytest.fixture
def no_kafka_env(monkeypatch):
    import os
    for name in list(os.environ):
        if name.startswith("STREAMPROC_KAFKA_") or name == "STREAMPROC_BOOTSTRAP":
            monkeypatch.delenv(name)
    return monkeypatch


def test_a_properties_file_as_kafka_tools_and_confluent_cloud_write_it():
    text = """
# Required connection configs for Kafka producer, consumer, and admin
bootstrap.servers=pkc-xxxx.eu-west-1.aws.confluent.cloud:9092
security.protocol = SASL_SSL
  sasl.mechanisms: PLAIN
! another comment style
sasl.username KEY123
sasl.password=a=b:c#not-a-comment
ssl.ca.location=/etc/ssl/ca.pem
long.value=first,\\
    second
empty.value=
"""
    assert parse_properties(text) == {
        "bootstrap.servers": "pkc-xxxx.eu-west-1.aws.confluent.cloud:9092",
        "security.protocol": "SASL_SSL",
        "sasl.mechanisms": "PLAIN",
        "sasl.username": "KEY123",
        "sasl.password": "a=b:c#not-a-comment",
        "ssl.ca.location": "/etc/ssl/ca.pem",
        "long.value": "first,second",
        "empty.value": "",
    }


def test_environment_wins_over_the_file_and_reaches_every_client(no_kafka_env, tmp_path):
    path = tmp_path / "client.properties"
    path.write_text("bootstrap.servers=cloud:9092\nsecurity.protocol=SASL_SSL\nsasl.username=from-file\n")
    no_kafka_env.setenv("STREAMPROC_KAFKA_CONFIG", str(path))
    no_kafka_env.setenv("STREAMPROC_KAFKA_SASL_USERNAME", "from-env")
    no_kafka_env.setenv("STREAMPROC_KAFKA_SASL_MECHANISMS", "SCRAM-SHA-512")
    no_kafka_env.setenv("STREAMPROC_KAFKA_SESSION_TIMEOUT_MS", "45000")
    no_kafka_env.setenv("STREAMPROC_KAFKA_VERSION", "4.1.1")  # the local broker's, not a property
    assert user_properties() == {"bootstrap.servers": "cloud:9092", "security.protocol": "SASL_SSL",
                                 "sasl.username": "from-env", "sasl.mechanisms": "SCRAM-SHA-512",
                                 "session.timeout.ms": "45000"}
    # the file's servers are the default bootstrap; STREAMPROC_BOOTSTRAP wins over them
    assert Settings.from_env().bootstrap == "cloud:9092"
    no_kafka_env.setenv("STREAMPROC_BOOTSTRAP", "other:9092")
    assert Settings.from_env().bootstrap == "other:9092"
    for conf in (consumer_config("other:9092", "g", **{"session.timeout.ms": 6000}),
                 producer_config("other:9092", **{"transactional.id": "t"}), admin_config("other:9092")):
        assert conf["bootstrap.servers"] == "other:9092"
        assert (conf["security.protocol"], conf["sasl.username"]) == ("SASL_SSL", "from-env")
    consumer = consumer_config("other:9092", "g", **{"session.timeout.ms": 6000})
    # the user's tuning wins over ours; the guarantees stay
    assert consumer["session.timeout.ms"] == "45000"
    assert (consumer["isolation.level"], consumer["enable.auto.commit"], consumer["group.id"]) == (
        "read_committed", False, "g")


@pytest.mark.parametrize(("variable", "value", "message"), [
    ("STREAMPROC_KAFKA_ISOLATION_LEVEL", "read_uncommitted",
     "Kafka property isolation.level=read_uncommitted is not allowed: it must be read_committed"),
    ("STREAMPROC_KAFKA_ENABLE_IDEMPOTENCE", "false",
     "Kafka property enable.idempotence=false is not allowed: it must be true"),
    ("STREAMPROC_KAFKA_ACKS", "1", "Kafka property acks=1 is not allowed: it must be -1 or all"),
    ("STREAMPROC_KAFKA_TRANSACTIONAL_ID", "mine",
     "Kafka property transactional.id=mine cannot be set: streamproc sets it itself"),
    ("STREAMPROC_KAFKA_ENABLE_AUTO_COMMIT", "true",
     "Kafka property enable.auto.commit=true cannot be set: streamproc sets it itself"),
])
def test_a_value_that_breaks_a_guarantee_is_refused(no_kafka_env, variable, value, message):
    no_kafka_env.setenv(variable, value)
    with pytest.raises(KafkaConfigError, match=message) as info:
        producer_config("127.0.0.1:1")
    assert "\n" not in str(info.value)


def test_an_allowed_spelling_of_a_required_value_is_kept(no_kafka_env):
    no_kafka_env.setenv("STREAMPROC_KAFKA_ACKS", "-1")
    no_kafka_env.setenv("STREAMPROC_KAFKA_ISOLATION_LEVEL", "read_committed")
    assert producer_config("127.0.0.1:1")["acks"] == "-1"


def test_the_same_refusal_from_the_file(no_kafka_env, tmp_path):
    path = tmp_path / "client.properties"
    path.write_text("isolation.level=read_uncommitted\n")
    no_kafka_env.setenv("STREAMPROC_KAFKA_CONFIG", str(path))
    with pytest.raises(KafkaConfigError, match="isolation.level=read_uncommitted"):
        consumer_config("127.0.0.1:1", "g")


def test_a_missing_file_is_named(no_kafka_env, tmp_path):
    no_kafka_env.setenv("STREAMPROC_KAFKA_CONFIG", str(tmp_path / "nope.properties"))
    with pytest.raises(KafkaConfigError, match="STREAMPROC_KAFKA_CONFIG=.*nope.properties: cannot read it"):
        admin_config("127.0.0.1:1")


def test_the_cli_refuses_before_starting_anything(no_kafka_env):
    from click.testing import CliRunner

    from streamproc.cli.main import main

    no_kafka_env.setenv("STREAMPROC_KAFKA_ISOLATION_LEVEL", "read_uncommitted")
    result = CliRunner().invoke(main, ["engine", "run"])
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        "Error: Kafka property isolation.level=read_uncommitted is not allowed: it must be read_committed "
        "(a reader must never see records of aborted or open transactions)"]


def test_cli_bootstrap_and_namespace_set_what_the_variables_set(no_kafka_env):
    from click.testing import CliRunner

    from streamproc.cli.main import main

    # set here so that the test's end restores them: the options write os.environ
    no_kafka_env.setenv("STREAMPROC_BOOTSTRAP", "unused:1")
    no_kafka_env.setenv("STREAMPROC_NAMESPACE", "unused")
    seen = {}

    @main.command("show-settings-for-test")
    def show() -> None:
        s = Settings.from_env()
        seen.update(bootstrap=s.bootstrap, namespace=s.namespace)

    try:
        result = CliRunner().invoke(main, ["--bootstrap", "b1:9092", "--namespace", "ns1", "show-settings-for-test"])
    finally:
        main.commands.pop("show-settings-for-test")
    assert result.exit_code == 0, result.output
    assert seen == {"bootstrap": "b1:9092", "namespace": "ns1"}


def test_a_property_librdkafka_does_not_know_is_refused_in_one_line(no_kafka_env):
    from streamproc.kafka.connection import check_connection
    from streamproc.kafka.errors import StartRefused

    no_kafka_env.setenv("STREAMPROC_KAFKA_SASL_JAAS_CONFIG", "org.apache.kafka...")  # Java clients' only
    with pytest.raises(StartRefused, match="^Kafka client settings refused: Java JAAS configuration is not supported"):
        check_connection("127.0.0.1:1", timeout_s=1)
    no_kafka_env.delenv("STREAMPROC_KAFKA_SASL_JAAS_CONFIG")
    no_kafka_env.setenv("STREAMPROC_KAFKA_CLIENT_DNS_LOOKUPS", "use_all_dns_ips")
    with pytest.raises(StartRefused, match='^Kafka client settings refused: No such configuration property: '
                                           '"client.dns.lookups"$'):
        check_connection("127.0.0.1:1", timeout_s=1)
