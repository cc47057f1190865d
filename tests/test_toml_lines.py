"""The one TOML locator the config, workload and geo-plan readers name ``file:line`` with."""

from __future__ import annotations

from cmdare.collectors.toml_lines import line_of

TEXT = """\
title = "x"
[sources]
scrape = ["a"]
'prometheus' = "http://127.0.0.1:9090"
[[stages]]
dc = "us"
[[stages]]
gpus = 2
dc = "eu"
[model]
""".splitlines()


def test_a_key_in_its_table_and_at_the_top_level():
    assert line_of(TEXT, "sources", "scrape") == 3
    assert line_of(TEXT, "sources", "prometheus") == 4  # a quoted key
    assert line_of(TEXT, "", "title") == 1
    assert line_of(TEXT, "", "sources") == 2  # a top-level name written as a table


def test_a_table_header_and_the_nth_of_an_array_of_tables():
    assert line_of(TEXT, "model") == 10
    assert line_of(TEXT, "stages", "dc", index=1) == 9
    assert line_of(TEXT, "stages", index=1) == 7
    assert line_of(TEXT, "stages", "dc") == 6  # without an index: the first that has it


def test_a_key_not_written_points_at_its_table_and_an_unwritten_table_at_nothing():
    assert line_of(TEXT, "stages", "gpus", index=0) == 5
    assert line_of(TEXT, "model", "params") == 10
    assert line_of(TEXT, "target", "steps") is None
    assert line_of(TEXT, "sources", "dc") == 2  # a key of another table is not this one's
