"""The run directories: creating and listing them (:mod:`.runs`), their lock, the job
journal ``jobs.jsonl`` and its history, what a damaged one lacks, and the files' tails."""
