"""Side virtual environments with the frameworks' own config parsers, and the
scripts that run those parsers over the real-project corpus (bench/audit_real)."""
