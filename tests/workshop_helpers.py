"""Assertions shared by the workshop tests: what a checker's verdict must look like."""

from __future__ import annotations


def assert_solved(result):
    assert result.solved, result.message
    assert result.message.startswith(f"Exercise ({result.exercise}) solved."), result.message
    assert "not solved" not in result.message


def assert_rejected(result, *fragments):
    assert not result.solved, result.message
    assert result.message.startswith(f"Exercise ({result.exercise}) not solved yet:"), result.message
    for fragment in fragments:
        assert fragment in result.message, f"{fragment!r} not in: {result.message}"
    assert "Traceback" not in result.message
    assert "the kit stopped" not in result.message, result.message  # a learner's fault, not the kit's
