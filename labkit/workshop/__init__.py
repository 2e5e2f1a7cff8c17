"""The workshop: what a learner does with the kit, grouped by role.

    checkers.py   what notebook 07 imports (``ex``): a checker per exercise, hints, the reveal
    exercises/    each exercise's record, its checker, and the code shown once it is done
    harness/      the launches and engine steps that run a learner's code and watch its memory
    editions/     the student edition, what a learner sees before each exercise, the agendas
    tour.py       the launches notebook 00 makes by hand
    feedback.py   what a checker returns
"""
