"""The editions: the student edition, what a learner sees before each exercise, and the workshop's agendas."""
