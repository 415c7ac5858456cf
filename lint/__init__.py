"""Tools for rule authors: formatting files, deep checks, dependency graphs."""
