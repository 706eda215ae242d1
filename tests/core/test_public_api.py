"""The public surface is a sorted list, and every name in it resolves."""

import spark_otel


def test_all_is_sorted_and_every_name_resolves() -> None:
    assert spark_otel.__all__ == sorted(spark_otel.__all__)
    for name in spark_otel.__all__:
        assert getattr(spark_otel, name) is not None, name


def test_cli_help_lists_every_command() -> None:
    from spark_otel.cli import COMMANDS, build_parser

    text = build_parser().format_help()
    for name, _module, _help in COMMANDS:
        assert name in text, name
