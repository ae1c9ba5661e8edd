"""Target descriptions and back ends (one folder per back end)."""
