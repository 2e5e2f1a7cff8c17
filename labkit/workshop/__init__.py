"""The workshop: exercise checkers, feedback, hints, and the student edition."""
