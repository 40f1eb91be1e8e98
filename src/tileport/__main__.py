"""`python -m tileport`: the `tileport` command (see the package's `_safe_path` for the working directory)."""

from tileport.cli import app

app(prog_name="tileport")
