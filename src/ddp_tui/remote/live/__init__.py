"""Hands on a running job: a shell beside it (:mod:`.shells`) and every rank's stack
(:mod:`.stacks`)."""
