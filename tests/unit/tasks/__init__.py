"""tasks.py, pmubuild.commands and ./devenv: what a clone runs."""
