"""The exercises of notebook 07: their checkers, hints, and the code shown after."""
