"""The cluster layer: everything that talks to a cluster, and nothing that draws.

:mod:`.cluster` is the facade the app and the CLI use (:mod:`.api` names what the app needs of
it); below it sit the submit plan and the read model it hands out, the run directories and
their job history, the schedulers (:mod:`.slurm`, the embedded :mod:`.local`) and the executors
that run commands and read files locally or over SSH (:mod:`.executor`, :mod:`.ssh`). Nothing
here imports textual or torch, and nothing below the facade imports it (docs/architecture.md,
"The layers", checked by ``lint-imports``).
"""
