"""Putting work on the scheduler: a spec planned and checked, a sweep planned as arrays, a
user's script prepared, and each submit recorded once (:mod:`.submission`, :mod:`.array_submit`)."""
