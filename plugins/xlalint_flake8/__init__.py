"""flake8 adapter for xlalint (filled in by the flake8 issue)."""
