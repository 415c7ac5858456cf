"""Rewrite docs/dsl.md's table of diagnostic codes from the registry
(diagnostic_codes.py), through `kbsolve kb codes`:

    python docs/codes_table.py

tests/test_diagnostic_codes.py checks that the table is current."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parent / "dsl.md"
START, END = "<!-- codes: `kbsolve kb codes` writes this part -->\n", "<!-- end of codes -->"

if __name__ == "__main__":
    table = subprocess.run([sys.executable, "-m", "kbsolve", "kb", "codes"],
                           capture_output=True, text=True, check=True).stdout
    head, rest = DOC.read_text(encoding="utf-8").split(START)
    DOC.write_text(head + START + table + END + rest.split(END, 1)[1], encoding="utf-8")
