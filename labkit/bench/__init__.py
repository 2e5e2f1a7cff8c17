"""The reproduction bench: named drafter modes, the scenario, recorded runs, the bench itself."""
