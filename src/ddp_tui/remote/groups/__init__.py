"""Runs of one experiment together: the scaling comparison, outcomes and diffs, the
advisor's reading of them, and cancelling or retrying a group at once."""
