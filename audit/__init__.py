"""kbsolve audit: find a project's training configs, judge them against the KB's
checks and rules, and report. Generic: every framework fact comes from the KB."""
