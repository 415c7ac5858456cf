"""Fail when a tracked data file (grammar, rule files, catalogs) is not in the wheel."""

import subprocess
import sys
import zipfile

wheel, root = sys.argv[1], sys.argv[2]
tracked = subprocess.run(["git", "-C", root, "ls-files", "grammar.lark", "kb"],
                         capture_output=True, text=True, check=True).stdout.split()
inside = set(zipfile.ZipFile(wheel).namelist())
missing = [path for path in tracked if f"kbsolve/{path}" not in inside]
if missing:
    print("missing from the wheel:", *missing, sep="\n  ")
    sys.exit(1)
print(f"wheel holds all {len(tracked)} data files")
