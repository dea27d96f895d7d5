"""How commands run and jobs are scheduled: the executors (local, :mod:`.ssh`), the
:class:`~.scheduler.Scheduler` protocol and its two schedulers (:mod:`.slurm`, the embedded
:mod:`.local`), and the job states and ids they share. Nothing here knows a run directory."""
