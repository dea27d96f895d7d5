"""Watching runs: each attempt's state, the table's files read anew, the followed run's new
output, why an attempt ended, and which ends and stalls to notify."""
