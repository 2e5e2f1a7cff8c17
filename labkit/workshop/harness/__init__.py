"""The launch harness: runs a learner's code through the kit and watches its memory."""
